-- DEFAULT constants of several types; REPLICA IDENTITY DEFAULT so the delete "before" has only
-- the key plus fallbacks for the other columns
CREATE TABLE public.d (
    id    integer PRIMARY KEY,
    i     integer DEFAULT 42,
    i_nn  integer NOT NULL DEFAULT 7,
    t     text DEFAULT 'hello',
    t_nn  text NOT NULL DEFAULT 'nn',
    vc    varchar(10) DEFAULT 'vc',
    b     boolean DEFAULT true,
    b_nn  boolean NOT NULL DEFAULT false,
    n     numeric(5,2) DEFAULT 3.14,
    n_nn  numeric(5,2) NOT NULL DEFAULT 2.50,
    dt    date DEFAULT '2020-02-29',
    dt_nn date NOT NULL DEFAULT '1999-12-31'
);
INSERT INTO public.d (id) VALUES (1);
