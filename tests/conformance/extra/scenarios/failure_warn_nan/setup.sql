-- event.processing.failure.handling.mode=warn: an event whose value cannot be converted is left
-- out (NaN in a NOT NULL numeric(10,2) column in precise mode: Debezium's converter refuses it,
-- the required field stays null and the event fails); the rows around it are emitted.
CREATE TABLE public.amounts (id integer PRIMARY KEY, amount numeric(10,2) NOT NULL, note text);
INSERT INTO public.amounts VALUES (1, 1.50, 'one'), (2, 'NaN', 'two'), (3, 3.25, 'three');
