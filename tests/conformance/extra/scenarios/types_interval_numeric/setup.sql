-- interval under interval.handling.mode (see props.txt): signs, mixed signs, fractions, large
-- values, hours past 24, a field-restricted interval; interval[] is not supported by Debezium.
-- Rows by the snapshot, the same values again (ids + 100) by streaming.
CREATE TABLE iv (
    id      integer PRIMARY KEY,
    v       interval,
    v_hm    interval hour to minute,
    v_dflt  interval DEFAULT '1 day 02:00:00',
    v_arr   interval[]
);
INSERT INTO iv VALUES
  (1, '1 year 2 mons 3 days 04:05:06.789', '5 hours 6 minutes', '1 day', '{"1 day"}'),
  (2, '-3 days -04:00:00', '-1 hour', '-1 day', NULL),
  (3, '00:00:00', '00:00', '0', NULL),
  (4, '1 mon -1 day', '100 hours', '1 mon -1 day +01:00:00', NULL),
  (5, '-1 years -2 mons', '-100:30', '-1 year +1 mon', NULL),
  (6, '00:00:00.000001', '0:01', '-00:00:00.000001', NULL),
  (7, '-00:00:01.5', '1:00', '2 days 00:00:00.5', NULL),
  (8, '178000000 years', '2000000:00', '-178000000 years', NULL),
  (9, '3 days 100:00:00.25', '-0:01', '1 year 2 mons -3 days +04:05:06.000789', NULL),
  (10, NULL, NULL, NULL, NULL);
