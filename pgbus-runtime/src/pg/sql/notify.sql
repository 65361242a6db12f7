-- Wakes workers listening on the channel. $1 channel, $2 queue
SELECT pg_notify($1, $2)
