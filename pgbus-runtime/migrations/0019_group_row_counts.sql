-- Row counts checked inside a statement (issue 22). A group of outcomes (see
-- `src/pg/store/group.rs`) writes all its members' rows in one statement and
-- sends `COMMIT` behind it without waiting for its answer, so a count that
-- does not match must stop the transaction in the server: this raises, the
-- statement fails, and the `COMMIT` queued behind it rolls back. Returns
-- `changed` when it matches.
CREATE FUNCTION {schema}.expect_rows(statement text, expected bigint, changed bigint)
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
    IF expected IS DISTINCT FROM changed THEN
        RAISE EXCEPTION 'pgbus: % changed % rows, expected %', statement, changed, expected;
    END IF;
    RETURN changed;
END
$$;
