-- Locks the run a signal is sent to, in a statement of its own before
-- send_signal.sql. Under READ COMMITTED a statement reads with the snapshot
-- taken when it starts: had the send waited for the lock inside its own
-- statement (behind an attempt that was parking its step), it would have read
-- the step as still in progress and woken nothing, while the park had looked
-- for arrived signals before this one existed: a lost wake-up. Taken here
-- first, the lock makes the send's snapshot include whatever the holder
-- committed. Only the run itself: a signal never touches a fan_out parent.
-- $1 run id
SELECT status FROM {schema}.runs WHERE id = $1 FOR UPDATE
