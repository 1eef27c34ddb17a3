package target

// TargetNames lists the names of a tenant's targets, in the order of the
// config: what a reply may suggest to a caller of that tenant.
func (r *Resolver) TargetNames(tenant string) []string {
	_, names := r.scope(tenant, "")
	return names
}
