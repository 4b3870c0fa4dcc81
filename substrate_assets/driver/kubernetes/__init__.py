"""The driver's side of a Kubernetes trial: the API client, the Locust pods and the cluster trial itself."""
