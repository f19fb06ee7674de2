package chef

// The payloads the bridge publishes from Chef's messages besides Chef's own
// JSON: a node's retained status, a failure for the team that owns the
// failing cookbook, a cookbook's rollout events and its retained tally. The
// Chef adapter builds them and consumers (the dashboard among them) decode
// them with these types, so that each has one declaration.

// Summary is the retained chef/<org>/<node>/status payload: the node's last
// known state, compact enough for a dashboard to take the whole fleet's at
// once. Fields the run did not report are null.
type Summary struct {
	NodeName             string  `json:"node_name"`
	OrganizationName     string  `json:"organization_name"`
	RunID                string  `json:"run_id"`
	Status               string  `json:"status"`
	StartTime            *string `json:"start_time"`
	EndTime              *string `json:"end_time"`
	DurationMS           *int64  `json:"duration_ms"`
	TotalResourceCount   *int64  `json:"total_resource_count"`
	UpdatedResourceCount *int64  `json:"updated_resource_count"`
	// FailedResourceCount counts the records with status "failed".
	FailedResourceCount int     `json:"failed_resource_count"`
	PolicyName          *string `json:"policy_name"`
	PolicyGroup         *string `json:"policy_group"`
	// ChefVersion is node.automatic.chef_packages.chef.version.
	ChefVersion *string `json:"chef_version"`
	EntityUUID  *string `json:"entity_uuid"`
	// ErrorClass and ErrorMessage are present only for a failed run.
	ErrorClass   *string `json:"error_class,omitempty"`
	ErrorMessage *string `json:"error_message,omitempty"`
	// FailedCookbook is the cookbook whose code failed the run; null when
	// the run succeeded or it is unknown.
	FailedCookbook *FailedCookbook `json:"failed_cookbook"`
	// Owner is the team that owns FailedCookbook (chef.owners); null when
	// none does.
	Owner *string `json:"owner"`
}

// TeamFailure is the payload of chef/<org>/team/<team>/failure/<node>: a
// failed run, compact, for the team that owns the failing cookbook.
type TeamFailure struct {
	NodeName         string  `json:"node_name"`
	OrganizationName string  `json:"organization_name"`
	PolicyName       *string `json:"policy_name"`
	PolicyGroup      *string `json:"policy_group"`
	Team             string  `json:"team"`
	Cookbook         string  `json:"cookbook"`
	CookbookVersion  *string `json:"cookbook_version"`
	// BlamedBy says how the cookbook was found: "resource" or "backtrace".
	BlamedBy string `json:"blamed_by"`
	// Resource is the failed resource, "type[name]", when there is one.
	Resource string `json:"resource,omitempty"`
	Recipe   string `json:"recipe,omitempty"`
	// ErrorClass and ErrorMessage are the run's error; the message is cut
	// at 1024 bytes.
	ErrorClass   *string `json:"error_class"`
	ErrorMessage *string `json:"error_message"`
	RunID        string  `json:"run_id"`
}

// RolloutEvent is the payload of
// chef/<org>/cookbook/<cookbook>/<version>/<success|failure>: a node's first
// run with this version of the cookbook (or its first run seen at all).
type RolloutEvent struct {
	NodeName         string `json:"node_name"`
	OrganizationName string `json:"organization_name"`
	Cookbook         string `json:"cookbook"`
	Version          string `json:"version"`
	// PreviousVersion is the version of the node's last run; null on the
	// node's first run, or when the cookbook is new to it.
	PreviousVersion *string `json:"previous_version"`
	PolicyName      *string `json:"policy_name"`
	PolicyGroup     *string `json:"policy_group"`
	// Status is the run's: "success" or "failure".
	Status string `json:"status"`
	// Failing is true when this cookbook's code failed the run.
	Failing bool `json:"failing"`
	// Owner is the team that owns the cookbook; null when none does.
	Owner *string `json:"owner"`
	RunID string  `json:"run_id"`
}

// CookbookTally is the retained payload of chef/<org>/cookbook/<cookbook>/versions:
// each version of the cookbook, its nodes, and how their last runs ended.
type CookbookTally struct {
	OrganizationName string `json:"organization_name"`
	Cookbook         string `json:"cookbook"`
	// Owner is the team that owns the cookbook; null when none does.
	Owner *string `json:"owner"`
	// Nodes counts the nodes that have the cookbook, any version.
	Nodes    int64                   `json:"nodes"`
	Versions map[string]VersionCount `json:"versions"`
}

// VersionCount is one version's line of a tally: its nodes, and how their
// last runs ended.
type VersionCount struct {
	Nodes   int64 `json:"nodes"`
	Success int64 `json:"success"`
	Failure int64 `json:"failure"`
}
