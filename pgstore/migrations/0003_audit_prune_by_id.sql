-- The audit log is pruned in id order: ids are drawn as transactions
-- start, so they follow the clock, and pruning walks the primary key from
-- the oldest entry to the first that is not old enough, as the embedded
-- stores do. The index on (at, id) served only that, and cost every
-- appended entry one more index insertion on the lock path.
-- {schema} is replaced by the quoted schema name.
DROP INDEX {schema}.audit_at;
