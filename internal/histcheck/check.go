package histcheck

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// CheckConfig configures Check.
type CheckConfig struct {
	// Timeout bounds the search; default one minute. A search that times
	// out is a failure: an unproven history proves nothing.
	Timeout time.Duration
	// VisualizeDir, when set, receives an HTML visualization of a history
	// that fails (porcupine's), to see which operations cannot be ordered.
	VisualizeDir string
}

// Check reports whether the history is linearizable under the lock model:
// nil when it is, otherwise an error naming the first family that is not
// and the last operations that could be ordered. Operations that fail
// outright (an answer no correct server gives) are reported first.
func Check(history []Op, cfg CheckConfig) error {
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	for _, op := range history {
		if op.Output.Outcome == Failed {
			return fmt.Errorf("client %d: %s", op.Client, describeOp(op.Input, op.Output))
		}
	}
	ops := make([]porcupine.Operation, len(history))
	for i, op := range history {
		ops[i] = porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: op.Return, Input: op.Input, Output: op.Output}
	}
	m := model.ToModel()
	res, info := porcupine.CheckOperationsVerbose(m, ops, cfg.Timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("the check of %d operations did not finish within %s", len(ops), cfg.Timeout)
	}
	err := fmt.Errorf("history of %d operations is not linearizable: %s", len(ops), explain(ops, info))
	if cfg.VisualizeDir != "" {
		path := filepath.Join(cfg.VisualizeDir, "history.html")
		if verr := porcupine.VisualizePath(m, info, path); verr == nil {
			err = fmt.Errorf("%w (visualization: %s)", err, path)
		}
		text := filepath.Join(cfg.VisualizeDir, "history.txt")
		if werr := os.WriteFile(text, []byte(listing(ops)), 0o644); werr == nil {
			err = fmt.Errorf("%w (every operation by family and call: %s)", err, text)
		}
	}
	return err
}

// listing is every operation, one a line, by family and then call time.
func listing(ops []porcupine.Operation) string {
	var b strings.Builder
	for _, family := range model.Partition(ops) {
		family = slices.Clone(family)
		slices.SortStableFunc(family, func(a, b porcupine.Operation) int {
			return int(min(max(a.Call-b.Call, -1), 1))
		})
		for _, op := range family {
			fmt.Fprintf(&b, "%s\t%s\n", op.Input.(Input).Family, describeTimed(op))
		}
	}
	return b.String()
}

// explain describes, for the first family that cannot be ordered, the end
// of the longest ordering found and the operations that could not follow.
func explain(ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	families := model.Partition(ops)
	for i, partials := range info.PartialLinearizationsOperations() {
		var longest []porcupine.Operation
		for _, lin := range partials {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
		if i >= len(families) || len(longest) == len(families[i]) {
			continue
		}
		family := families[i][0].Input.(Input).Family
		var b strings.Builder
		fmt.Fprintf(&b, "family %s: %d of %d operations can be ordered; the ordering ends", family, len(longest), len(families[i]))
		for _, op := range longest[max(0, len(longest)-10):] {
			fmt.Fprintf(&b, "\n    %s", describeTimed(op))
		}
		b.WriteString("\n  and none of these fits next:")
		shown := 0
		for _, op := range families[i] {
			if shown < 6 && !slices.ContainsFunc(longest, func(o porcupine.Operation) bool { return o.Call == op.Call && o.ClientId == op.ClientId }) {
				fmt.Fprintf(&b, "\n    %s", describeTimed(op))
				shown++
			}
		}
		return b.String()
	}
	return "no ordering fits"
}

func describeTimed(op porcupine.Operation) string {
	ret := "∞"
	if op.Return != math.MaxInt64 {
		ret = fmt.Sprint(time.Duration(op.Return))
	}
	return fmt.Sprintf("[%s–%s] client %d: %s", time.Duration(op.Call), ret, op.ClientId,
		describeOp(op.Input.(Input), op.Output.(Output)))
}

// VisualizeDir returns the directory named by HOLDFAST_HISTORY_DIR, or
// "" when it is not set.
func VisualizeDir() string { return os.Getenv("HOLDFAST_HISTORY_DIR") }
