INSERT INTO decnan VALUES (11, 'NaN', 'NaN', 1.5), (12, 1.25, 'Infinity', 2), (13, 2.5, '-Infinity', 3), (14, 3.75, 4.5, 4);
