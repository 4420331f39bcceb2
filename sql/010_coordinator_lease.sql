-- The coordinator lease's terms (docs/coordinator.md, "Fencing"). The
-- coordinator that holds the database's lock, once no session of a
-- previous one is left, counts one more term here. One that lost the lock
-- and takes it again finds the count moved on when another coordinator
-- held the lock in between, and stops rather than go on from what it
-- holds in memory.
CREATE TABLE coordinator_lease (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    term bigint NOT NULL CHECK (term >= 0)
);
INSERT INTO coordinator_lease (term) VALUES (0);
