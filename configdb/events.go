package configdb

import (
	"encoding/json"
	"strconv"

	"github.com/opsfirehose/firehose/topics"
)

// The entity events, the last level of their topics.
const (
	eventCreated = "created"
	eventUpdated = "updated"
	eventDeleted = "deleted"
)

// ValuesEvent is the payload published for every write of values or
// overrides, keys operations included.
type ValuesEvent struct {
	EnvironmentID int64   `json:"environment_id"`
	Resource      string  `json:"resource"`
	ResourceID    int64   `json:"resource_id"`
	Kind          DocKind `json:"kind"`
	// Levels is the level path, [[name, value], ...], empty for the root.
	Levels  [][2]string `json:"levels"`
	Version int64       `json:"version"`
	Author  string      `json:"author"`
	Changed Changed     `json:"changed"`
	// Document is the new document.
	Document json.RawMessage `json:"document"`
}

// EnvironmentEvent is published when an environment is created, updated or
// deleted; Environment is its new state, or its last one when deleted.
type EnvironmentEvent struct {
	EnvironmentID int64       `json:"environment_id"`
	Event         string      `json:"event"`
	Author        string      `json:"author"`
	Environment   Environment `json:"environment"`
}

// ComponentEvent is published when a component, or one of its resource
// definitions, is created, updated or deleted.
type ComponentEvent struct {
	ComponentID int64     `json:"component_id"`
	Event       string    `json:"event"`
	Author      string    `json:"author"`
	Component   Component `json:"component"`
}

func (s *Store) emitValues(t *txn, ev ValuesEvent, levels []topics.LevelValue) error {
	topic, err := s.opts.Topics.Values(strconv.FormatInt(ev.EnvironmentID, 10), ev.Resource, string(ev.Kind), levels)
	return emitJSON(t, topic, err, ev)
}

func (s *Store) emitEnvironment(t *txn, event, author string, env Environment) error {
	topic, err := s.opts.Topics.Environment(strconv.FormatInt(env.ID, 10), event)
	return emitJSON(t, topic, err, EnvironmentEvent{EnvironmentID: env.ID, Event: event, Author: author, Environment: env})
}

func (s *Store) emitComponent(t *txn, event, author string, c Component) error {
	topic, err := s.opts.Topics.Component(strconv.FormatInt(c.ID, 10), event)
	return emitJSON(t, topic, err, ComponentEvent{ComponentID: c.ID, Event: event, Author: author, Component: c})
}

// emitEnvironmentUpdated emits the update of environment id, in its state
// as the transaction leaves it.
func (s *Store) emitEnvironmentUpdated(t *txn, author string, id int64) error {
	env, err := t.environment(id)
	if err != nil {
		return err
	}
	return s.emitEnvironment(t, eventUpdated, author, env)
}

// emitJSON records ev, encoded, in the outbox under topic; topicErr is the
// error of building topic, if any, for the caller to pass straight on.
func emitJSON(t *txn, topic string, topicErr error, ev any) error {
	if topicErr != nil {
		return topicError(topicErr)
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return t.emit(topic, payload)
}

// topicError turns a value that cannot become a topic level (too long) into
// an Invalid error naming its field; nothing is stored then.
func topicError(err error) error {
	if le, ok := err.(*topics.LevelError); ok {
		return &Error{Kind: Invalid, Msg: "cannot publish this change: " + le.Error(), Field: le.Level}
	}
	return err
}
