-- 007_node_totals.sql — each node's work in all, kept on its nodes row.
--
-- GET /api/nodes summed node_work's rows on every call, one per session
-- ever, so it slowed as sessions piled up (10,000 nodes with a million
-- session rows: 0.2 to 0.3 s). A node's totals now live on its row: a
-- trigger adds what each write to node_work raised. A session's row only
-- ever rises (its writes take the greater of old and new), so a statement
-- the store runs twice raises nothing and adds nothing. node_work stays,
-- one row per session, as what makes a repeated write harmless; the API
-- reads only the live sessions' rows of it, to put their counts of now in
-- place of what they last wrote.

ALTER TABLE nodes
    ADD COLUMN chunks_total bigint NOT NULL DEFAULT 0 CHECK (chunks_total >= 0),
    ADD COLUMN items_total  bigint NOT NULL DEFAULT 0 CHECK (items_total >= 0);

UPDATE nodes SET chunks_total = w.chunks, items_total = w.items
  FROM (SELECT node, sum(chunks) AS chunks, sum(items) AS items FROM node_work GROUP BY node) w
 WHERE w.node = nodes.id;

-- AFTER, so that it runs once the statement that wrote the row is done:
-- a session's write also sets its node's last_seen, and one statement may
-- not change a row twice.
CREATE FUNCTION node_work_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE nodes SET chunks_total = chunks_total + NEW.chunks, items_total = items_total + NEW.items
         WHERE id = NEW.node;
    ELSIF NEW.chunks <> OLD.chunks OR NEW.items <> OLD.items THEN
        UPDATE nodes SET chunks_total = chunks_total + (NEW.chunks - OLD.chunks),
                         items_total = items_total + (NEW.items - OLD.items)
         WHERE id = NEW.node;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER node_work_totals AFTER INSERT OR UPDATE ON node_work
    FOR EACH ROW EXECUTE FUNCTION node_work_count();
