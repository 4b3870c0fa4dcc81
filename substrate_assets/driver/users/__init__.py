"""The virtual users of every workload family, one module per family over one base.

Nothing here knows Locust: a user books its rows through an injected ``record`` and waits through an injected
``sleep``; ``driver/locustfile.py`` wraps each in a Locust ``User``.
"""
