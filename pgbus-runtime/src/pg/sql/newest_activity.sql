-- When the newest run was created (the primary key's last entry; ids grow
-- with time), or NULL for a schema without runs: where an insights window
-- that fits the data ends.
SELECT r.created_at FROM {schema}.runs r ORDER BY r.id DESC LIMIT 1
