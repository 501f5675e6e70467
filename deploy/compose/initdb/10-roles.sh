#!/bin/sh
# The two roles of docs/operations.md, "Database roles", made when the postgres image first initialises its
# data: the owner of the database (it runs the migrations) and the app's role (web, worker, beat).
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v owner_password="$FLEETWATT_DB_OWNER_PASSWORD" -v app_password="$FLEETWATT_DB_APP_PASSWORD" <<'SQL'
CREATE ROLE fleetwatt_owner LOGIN PASSWORD :'owner_password';
CREATE ROLE fleetwatt_app LOGIN PASSWORD :'app_password';
CREATE DATABASE fleetwatt OWNER fleetwatt_owner;
SQL
