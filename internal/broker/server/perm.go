package server

// deny returns why the stream's identity may not act for tenant with
// permission p ("tenant mismatch" or "forbidden"), or "" when it may. Both
// refusals carry code forbidden.
func (h *handler) deny(tenant string, p Perm) string {
	if tenant != h.id.Tenant {
		return "tenant mismatch"
	}
	if !h.id.Allows(p) {
		return "forbidden"
	}
	return ""
}
