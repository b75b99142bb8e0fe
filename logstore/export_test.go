package logstore

// OpenChurning opens a store whose segments and checkpoints come every few
// dozen KiB, so that a crash test kills it amid rotations and checkpoints.
func OpenChurning(dir string, cfg Config) (*Store, error) {
	return open(dir, cfg, tuning{segmentBytes: 32 << 10, checkpointBytes: 64 << 10, syncers: defaultTuning.syncers})
}
