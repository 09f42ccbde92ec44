// Package fanout distributes the store's health feed to every StreamHealth
// subscriber of this process with one reader of the feed.
//
// A Hub reads the feed (store.Events in a loop from LastToken, backing off
// while the feed does not answer, and resynchronising from the current state
// when its own position has expired) and offers each event to every Sub. The
// hub never waits on a subscriber.
//
// A Sub is a bounded buffer of pending states in feed order. Up to
// SubOptions.Queue (DefaultQueue, 64) states are kept one by one, so a
// subscriber that keeps up sees every change, even a burst of changes of one
// node; beyond that the buffer coalesces: a further change of a node already
// pending replaces that node's newest pending state. A Sub therefore holds
// at most Queue states plus one per selected node whatever its reader does
// (with Queue < 0, one per selected node), so a slow or stuck subscriber
// neither delays the others nor grows; when it reads again it gets, for every
// node, its latest state. One that fell behind by more than Queue states
// sees only the latest state of a node: a status that came and went meanwhile
// is not replayed. That is the price of bounded memory, and the latest state
// is what a router needs.
//
// # Resume tokens under coalescing
//
// Every message a Sub hands out carries a feed token T with this guarantee:
// every event at or before T that the subscriber selects has been handed
// out, itself or folded into a later state of its node that has been handed
// out or is still pending after T (or it was dropped because it did not
// change what the subscriber was last sent, or was observed no later than
// that). Reading the feed after T thus
// gives no gap and repeats no state already handed out. The rule:
//
//   - pending states are ordered by the position of the newest event folded
//     into each (a state that absorbs a newer event moves to the back);
//   - a change is handed out from the front, with the token of the newest
//     event folded into it: every other pending state holds a newer event,
//     which a resumed reader reads again;
//   - a heartbeat is handed out only when nothing is pending (checked under
//     the same lock that reads the position), with the token of the newest
//     event offered to the Sub, matched or not, so idle subscribers' tokens
//     keep up with the feed;
//   - a state folded in when the hub's own position expired has no position:
//     it is handed out with the token of the message before it, expired too,
//     so a subscriber resuming there resyncs.
//
// Subscribers start in one of two ways: Sync attaches at the hub's current
// position and returns the newest state the hub has read of every selected
// node (a caller that lists the store afterwards takes, per node, whichever
// is newer, so nothing before the position is lost, and MarkSent so that
// events after it repeating the listing, or older than it, are not handed
// out: a subscriber never goes back in time); Resume
// attaches after a token, reading from the feed itself what the hub no
// longer holds, or returns store.ErrTokenExpired when the feed does not hold
// it either.
//
// # Nodes that leave
//
// A node that leaves the fleet gets one last event, its state marked
// removed (NodeHealth.removed; see refresh.Removed). The hub forgets the
// node, and a Sub hands the removal out like any change (always: it is news
// even to a subscriber that resumed without the node's earlier states) and
// then forgets what it sent of the node. A hub resynchronising from the
// current state folds a removal into every subscriber for each node it knew
// that the current state no longer has. The hub and every Sub thus hold
// state only of nodes in the fleet: at most the store's node count.
//
// When the hub stops (its context ends) every Sub's Next returns ErrClosed at
// once, so every stream ends together.
package fanout
