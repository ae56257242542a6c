-- The server's smallest logical_decoding_work_mem for this database's walsenders: transactions of
-- more than a few hundred rows are then streamed while in progress to a protocol-2 client
-- (Headwater with streaming.in.progress.transactions=auto on PostgreSQL 14+), and spilled to disk
-- on the server for Debezium's protocol 1. The events must be the same.
DO $$ BEGIN
  EXECUTE format('ALTER DATABASE %I SET logical_decoding_work_mem = %L', current_database(), '64kB');
END $$;
CREATE TABLE public.big (id integer PRIMARY KEY, v text);
CREATE TABLE public.small (id integer PRIMARY KEY, v text);
INSERT INTO public.small VALUES (0, 'snapshot');
