-- Run once by the postgres image when it creates the database (docker-entrypoint-initdb.d).
-- Behind a transaction-mode pooler, dagent's connections send no startup options: the role finds dagent's
-- schema through its own setting (dagent checks at start, and refuses with this statement when it is missing).
ALTER ROLE dagent IN DATABASE dagent SET search_path TO dagent;
