-- Each upload's file gets its own object key (`<sha256>.<random hex>`), so that the retention
-- sweep deleting an old upload's file can never take the file of a new upload of the same bytes
-- (with one key per content, an upload landing between the sweep's check and its delete lost its
-- file). Files stored before this migration keep their key: the SHA-256 alone.
ALTER TABLE snapshots ADD COLUMN object_key TEXT;
UPDATE snapshots SET object_key = sha256;
CREATE INDEX snapshots_object_key ON snapshots (object_key);
