INSERT INTO app.snake_case VALUES (2, 'a2');
DELETE FROM public."tábla" WHERE id = 1;
