package logstore_test

import (
	"testing"

	"github.com/holdfast/holdfast/internal/embeddedtest"
)

func BenchmarkOpenMillionLocks(b *testing.B) { embeddedtest.BenchmarkOpenMillionLocks(b, openStore) }
