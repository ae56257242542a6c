-- hstore.handling.mode=map: hstore as a Connect map (Java HashMap order), NULL values, the empty
-- hstore, escapes, many keys, an hstore[] column and an unchanged TOASTed hstore.
-- Rows 1..5 by the snapshot, the same values again (ids 101..105) by streaming.
CREATE EXTENSION IF NOT EXISTS hstore;
CREATE TABLE hs (
    id      integer PRIMARY KEY,
    h       hstore,
    h_arr   hstore[],
    note    text
);
INSERT INTO hs VALUES
  (1, 'a=>1, "b c"=>NULL', '{"a=>1","x=>NULL"}', 'one'),
  (2, '', '{}', 'two'),
  (3, '"quo\"te"=>"back\\slash", "ünï"=>"cödé", "k=>v"=>"a,b", ""=>"empty key"', NULL, 'three'),
  (4, 'k01=>1, k02=>2, k03=>3, k04=>4, k05=>5, k06=>6, k07=>7, k08=>8, k09=>9, k10=>10, k11=>11, k12=>12, k13=>13,
       zeta=>z, alpha=>a, Mid=>m, UPPER=>u, lower=>l', '{}', 'four'),
  (5, NULL, NULL, NULL);
