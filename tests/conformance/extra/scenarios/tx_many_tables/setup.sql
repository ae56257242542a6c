-- one transaction touching 14 tables (END data_collections order = Java HashMap iteration order
-- after a resize past 12 entries) and a multi-table transaction with a transactional message
CREATE TABLE public.t01 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t02 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t03 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t04 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t05 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t06 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t07 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t08 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t09 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t10 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t11 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t12 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t13 (id integer PRIMARY KEY, v text);
CREATE TABLE public.t14 (id integer PRIMARY KEY, v text);
