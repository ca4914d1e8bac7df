-- A file of a bundle kept in another form than it came in: `kept_as` names that form (`fr_3.json`
-- for the flight-recorder pickle `fr_3`, kept as its content in JSON, redacted). NULL: kept as it
-- came (a text file, redacted). Rows stored before it (NULL, `is_binary` 1) hold a pickle's
-- readable text only.
ALTER TABLE incident_files ADD COLUMN kept_as TEXT;
