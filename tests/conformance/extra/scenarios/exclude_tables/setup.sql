-- table.exclude.list is a regex list: public\.audit.* excludes audit and audit_log, not notaudit
CREATE TABLE public.orders (id integer PRIMARY KEY, item text);
CREATE TABLE public.audit (id integer PRIMARY KEY, msg text);
CREATE TABLE public.audit_log (id integer PRIMARY KEY, msg text);
CREATE TABLE public.notaudit (id integer PRIMARY KEY, msg text);
INSERT INTO public.orders VALUES (1, 'pen');
INSERT INTO public.audit VALUES (1, 'snap');
INSERT INTO public.audit_log VALUES (1, 'snap');
INSERT INTO public.notaudit VALUES (1, 'snap');
