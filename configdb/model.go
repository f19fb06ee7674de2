package configdb

import (
	"encoding/json"
	"time"

	"github.com/opsfirehose/firehose/topics"
)

// Component provides resource definitions. Its name is unique.
type Component struct {
	ID                  int64                `json:"id"`
	Name                string               `json:"name"`
	ResourceDefinitions []ResourceDefinition `json:"resource_definitions"`
}

// ResourceDefinition names a data source (a resource), such as "astute" or
// "override/plugins". Content is any JSON, null by default.
type ResourceDefinition struct {
	ID          int64           `json:"id"`
	Name        string          `json:"name"`
	ComponentID *int64          `json:"component_id"`
	Content     json.RawMessage `json:"content"`
}

// Environment holds documents for the resources of its components, at the
// root level and below its hierarchy levels, least specific first.
type Environment struct {
	ID              int64    `json:"id"`
	Components      []int64  `json:"components"`
	HierarchyLevels []string `json:"hierarchy_levels"`
}

// Level is one hierarchy level of an environment. Values lists the level
// values that documents have been written under, sorted.
type Level struct {
	ID            int64    `json:"id"`
	Name          string   `json:"name"`
	EnvironmentID int64    `json:"environment_id"`
	Parent        *string  `json:"parent"`
	Values        []string `json:"values"`
}

// DocKind is one of the two documents stored at each level path.
type DocKind string

// The two document kinds. They are also the topic level after the resource.
const (
	Values    DocKind = topics.KindValues
	Overrides DocKind = topics.KindOverrides
)

// Address names the place of a document: an environment, a resource by id
// (all digits) or name, and a level path that must be a prefix of the
// environment's levels.
type Address struct {
	Env      int64
	Resource string
	Levels   []topics.LevelValue
}

// Document is one stored document as it is now, or as it was at a version.
type Document struct {
	// Body is canonical JSON: compact, object keys sorted. It is "{}" when
	// nothing was ever stored.
	Body []byte
	// Version is the document's version number, 0 when nothing was stored.
	Version int64
	// ETag identifies this state of the document for If-Match, quoted. It is
	// `"0"` when nothing was stored.
	ETag string
}

// Version describes one write of a document.
type Version struct {
	Version int64     `json:"version"`
	Kind    DocKind   `json:"kind"`
	Time    time.Time `json:"time"`
	Author  string    `json:"author"`
	Changed Changed   `json:"changed"`
}

// Changed summarises a write: the top-level keys that were added or got a new
// value, and those that were removed. A document that is not a JSON object
// has no keys.
type Changed struct {
	Set     []string `json:"set"`
	Deleted []string `json:"deleted"`
}

// Ref names a component by id, or by name when Name is set.
type Ref struct {
	ID   int64
	Name string
}

// NewComponent is what creating a component takes.
type NewComponent struct {
	Name                string
	ResourceDefinitions []NewResourceDefinition
}

// NewResourceDefinition is what creating a resource definition takes. ID 0
// means the next free id. Content nil means JSON null.
type NewResourceDefinition struct {
	ID          int64
	Name        string
	ComponentID *int64
	Content     json.RawMessage
}

// ComponentUpdate changes the fields that are not nil. ResourceDefinitions
// replaces the component's set: the listed definitions move to it, and the
// ones it had that are not listed are deleted.
type ComponentUpdate struct {
	Name                *string
	ResourceDefinitions *[]int64
}

// ResourceDefinitionUpdate changes the fields that are set.
type ResourceDefinitionUpdate struct {
	Name *string
	// SetComponent says whether ComponentID is to be changed; a nil
	// ComponentID then detaches the definition from any component.
	SetComponent bool
	ComponentID  *int64
	Content      *json.RawMessage
}

// NewEnvironment is what creating an environment takes. ID 0 means the next
// free id; any other id is kept (Fuel uses its cluster id).
type NewEnvironment struct {
	ID              int64
	Components      []Ref
	HierarchyLevels []string
}

// EnvironmentUpdate changes the fields that are not nil. HierarchyLevels
// re-orders and re-uses levels by name, and deletes the levels it drops with
// the documents stored under them.
type EnvironmentUpdate struct {
	Components      *[]Ref
	HierarchyLevels *[]string
}

// ResourceDefinitionFilter selects resource definitions by component.
type ResourceDefinitionFilter struct {
	// ByComponent restricts the list to definitions whose component is
	// ComponentID (nil: those with no component).
	ByComponent bool
	ComponentID *int64
}

// PutDoc is one document of a PutMany batch.
type PutDoc struct {
	Address Address
	Kind    DocKind
	// Body is the document as JSON; it is stored in canonical form.
	Body []byte
}

// Event is a message waiting in the outbox, built when its change was
// committed.
type Event struct {
	// Seq orders events; Delete takes it.
	Seq int64
	// ID is the de-duplication id, stable across publishing retries.
	ID      string
	Topic   string
	Payload []byte
	// Time is when the change was committed.
	Time time.Time
}
