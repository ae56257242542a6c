USE largetx;
GO
-- 2500 rows in one statement (digits cross-joined: no dependence on a catalog view's size); ORDER BY: real SQL
-- Server inserts into the clustered index in key order (a sort before the insert), the emulator in the SELECT's order
INSERT INTO dbo.bulk_rows (id, grp, label)
SELECT i, i % 7, CONCAT('row-', i)
FROM (SELECT d1.d + 10 * d2.d + 100 * d3.d + 1000 * d4.d + 1 AS i
      FROM (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d1(d)
      CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d2(d)
      CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d3(d)
      CROSS JOIN (VALUES (0),(1),(2)) d4(d)) n
WHERE i <= 2500
ORDER BY i;
GO
UPDATE dbo.bulk_rows SET label = NULL WHERE grp = 3;
GO
DELETE FROM dbo.bulk_rows WHERE id > 2490;
GO
