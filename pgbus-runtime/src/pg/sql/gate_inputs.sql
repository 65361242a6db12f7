-- What the gates of just-claimed attempts read, in the claim's transaction
-- after claim.sql took the locks: a statement reads with the snapshot it
-- starts with, and this one starts after every signal sent to these runs
-- before the claim locked them has committed (a send locks the run first), and
-- no other can commit until the claim does. For each attempt: the signal of its
-- wait name that an earlier attempt of the step consumed, then at most 8
-- unconsumed ones above the row's `signals_seen_to`, oldest first; whether the
-- attempt before it timed out waiting (a reattempt sees that again); and the
-- latest batch of any attempt of the step, with the output of the attempt that
-- started it.
-- $1 step ids, $2 their wait names (NULL for none)
WITH c AS (
    SELECT s.id, s.run_id, s.step_name, s.attempt, s.reattempts, s.signals_seen_to, x.name
    FROM unnest($1::bigint[], $2::text[]) AS x(id, name)
    JOIN {schema}.steps s ON s.id = x.id
)
SELECT c.id,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                    'id', g.id, 'name', g.name, 'payload', g.payload,
                    'taken_before', g.taken_before) ORDER BY g.taken_before DESC, g.id), '[]'::jsonb)
        FROM ((SELECT g.id, g.name, g.payload, true AS taken_before
               FROM {schema}.signals g
               JOIN {schema}.steps p ON p.id = g.consumed_by
               WHERE c.name IS NOT NULL AND g.run_id = c.run_id AND g.name = c.name
                 AND p.run_id = c.run_id AND p.step_name = c.step_name
               ORDER BY g.id LIMIT 1)
              UNION ALL
              (SELECT g.id, g.name, g.payload, false AS taken_before
               FROM {schema}.signals g
               WHERE c.name IS NOT NULL AND g.run_id = c.run_id AND g.name = c.name
                 AND g.consumed_by IS NULL AND g.id > coalesce(c.signals_seen_to, 0)
               ORDER BY g.id LIMIT 8)) g) AS signals,
       (c.reattempts > 0 AND EXISTS (
            SELECT 1 FROM {schema}.events e
            WHERE e.run_id = c.run_id AND e.step_name = c.step_name
              AND e.attempt = c.attempt - 1 AND e.event = 'wait_timed_out')) AS timed_out_before,
       (SELECT jsonb_build_object('id', b.id, 'total', b.total, 'finished', b.succeeded,
                                  'cancelled', b.failed, 'open', b.status = 'open',
                                  'own', b.parent_step_id = c.id, 'output', p.output)
        FROM {schema}.batches b
        JOIN {schema}.steps p ON p.id = b.parent_step_id
        WHERE b.run_id = c.run_id AND p.step_name = c.step_name
        ORDER BY b.id DESC LIMIT 1) AS batch
FROM c
