package logstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A directory a newer build wrote in a format this build does not know
// (its checkpoint, or the segment it went on in) is refused at open, with
// the version named, and left as it was: not read as this format, not cut
// back, not taken for a torn segment and removed. So a downgrade fails at
// start instead of serving, or losing, the wrong state
// (docs/OPERATIONS.md, "Upgrades").
func TestNewerFormatIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openTuned(t, dir, tuning{segmentBytes: 4 << 10, checkpointBytes: 16 << 10, syncers: defaultTuning.syncers})
	for i := range 200 {
		commit(t, s, i)
	}
	s.Close()
	checkpoints, _ := filepath.Glob(filepath.Join(dir, checkpointPrefix+"*"))
	segments, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(checkpoints) == 0 || len(segments) < 2 {
		t.Fatalf("checkpoints %v, segments %v; want a checkpoint and several segments", checkpoints, segments)
	}
	for name, file := range map[string]string{
		"the checkpoint":   filepath.Base(checkpoints[len(checkpoints)-1]),
		"the last segment": filepath.Base(segments[len(segments)-1]),
	} {
		d := copyDir(t, dir)
		path := filepath.Join(d, file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// As a newer build would write it: its version, a valid checksum.
		binary.LittleEndian.PutUint32(b[8:], formatVersion+1)
		binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		before := contents(t, d)
		s, err := open(d, Config{Logger: quietLog}, defaultTuning)
		if err == nil {
			s.Close()
			t.Fatalf("%s at format version %d: opened", name, formatVersion+1)
		}
		if want := fmt.Sprintf("format version %d, this build reads %d", formatVersion+1, formatVersion); !strings.Contains(err.Error(), want) {
			t.Errorf("%s at a newer version: open = %v, want it to say %q", name, err, want)
		}
		if after := contents(t, d); !reflect.DeepEqual(before, after) {
			t.Errorf("%s at a newer version: the refused open changed the directory", name)
		}
	}
}

// contents maps each file in dir to its bytes.
func contents(t *testing.T, dir string) map[string]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(name)] = string(b)
	}
	return out
}
