package holdfast

import "github.com/holdfast/holdfast/store"

// Publish delivers audit entries that another Manager committed to the
// same store to this Manager's subscribers, as if this Manager had
// committed them. Servers sharing one store call it with what the store
// reports of the others' commits (pgstore's Listen), so that an event
// stream on any server sees every server's commits. Never pass entries
// this Manager committed: Subscribe already delivered them.
func (m *Manager) Publish(entries ...store.AuditEntry) {
	out := make([]AuditEntry, len(entries))
	for i, e := range entries {
		out[i] = toAuditEntry(e)
	}
	m.events.publish(out)
}
