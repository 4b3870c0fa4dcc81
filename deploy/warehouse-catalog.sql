-- The shared warehouse's catalog database, least privilege: run with psql as a superuser, connected to the
-- catalog database, once it exists (CREATE DATABASE substrate_lake OWNER lake_writer) and both roles do:
--
--   CREATE ROLE lake_writer LOGIN PASSWORD '…';   -- the deployment's run pods: creates and writes the catalog
--   CREATE ROLE lake_reader LOGIN PASSWORD '…';   -- workstations: reads it
--   psql -d substrate_lake -f deploy/warehouse-catalog.sql
--
-- Only the two roles connect (psql's DBNAME is the database it is connected to), and only they use schema public;
-- DuckLake's first attach by the writer creates the catalog's tables there; the reader may SELECT those and nothing
-- else.
REVOKE ALL ON DATABASE :"DBNAME" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"DBNAME" TO lake_writer, lake_reader;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO lake_reader;
ALTER DEFAULT PRIVILEGES FOR ROLE lake_writer IN SCHEMA public GRANT SELECT ON TABLES TO lake_reader;
