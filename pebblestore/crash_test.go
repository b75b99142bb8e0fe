package pebblestore_test

func crashChild() bool { return false }
