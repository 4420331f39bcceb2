-- 004_journal_unchecked.sql — the journal's job_id without a foreign key.
--
-- The journal takes one row per accepted result, tens of thousands a second,
-- and the key's check (a lookup in jobs per inserted row) was a fifth of the
-- database's time per row. Its one writer, the coordinator's scheduler,
-- writes rows only for jobs it loaded from jobs, and nothing in simfarm
-- deletes a job; what the key's ON DELETE CASCADE did for a job deleted by
-- hand, a trigger on jobs does now.

ALTER TABLE journal DROP CONSTRAINT journal_job_id_fkey;

CREATE FUNCTION journal_forget_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM journal WHERE job_id = OLD.id;
    RETURN OLD;
END;
$$;

CREATE TRIGGER jobs_forget_journal AFTER DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION journal_forget_job();
