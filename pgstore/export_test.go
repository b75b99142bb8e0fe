package pgstore

// LockKeyID is the advisory lock id pgstore's writers take for a key, for
// tests that compare it with the SQL lock_id.
func LockKeyID(schema, key string) int64 { return lockID(schema, classKey, key) }

// ReadMark starts the statements of read transactions.
const ReadMark = readMark

// PlannerSettings are the set_config calls of a write transaction.
const PlannerSettings = plannerSettings
