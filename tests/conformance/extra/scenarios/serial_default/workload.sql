INSERT INTO s_serial (name) VALUES ('b');
INSERT INTO s_serial DEFAULT VALUES;
INSERT INTO s_identity DEFAULT VALUES;
UPDATE s_serial SET name = 'c' WHERE id = 2;
DELETE FROM s_serial WHERE id = 1;
DELETE FROM s_identity WHERE id = 1;
