-- Step attempts that ended in the window, per time bucket and outcome (the
-- dashboard's insights). A scan of the steps ended in the window; no index on
-- finished_at (every step row would pay for it), so a 30-day window over a
-- busy schema reads every step row retention keeps.
-- $1 from, $2 to, $3 bucket (ms)
SELECT date_bin($3::bigint * interval '1 millisecond', finished_at, TIMESTAMPTZ 'epoch') AS bucket,
       outcome, count(*) AS steps
FROM {schema}.steps
WHERE finished_at >= $1 AND finished_at <= $2 AND outcome IS NOT NULL
GROUP BY 1, 2
ORDER BY 1, 2
