#ifndef OVERTIME_CSYSTEMDBUS_H
#define OVERTIME_CSYSTEMDBUS_H
// sd-bus (libsystemd.so.0) loaded with dlopen on first use, for talking to systemd-logind:
// a program that never asks links nothing of libsystemd, and static builds stay static.
// Only the calls Overtime makes, each a small wrapper (sd_bus_message_read is variadic,
// which Swift cannot call). The types are opaque here; sd-bus's ABI is stable.
#include <stddef.h>
#include <stdint.h>

typedef struct overtime_bus overtime_bus;
typedef struct overtime_bus_message overtime_bus_message;
typedef struct overtime_bus_slot overtime_bus_slot;

/// sd-bus's `sd_bus_error`, laid out as libsystemd has it.
typedef struct {
    const char *name;
    const char *message;
    int need_free;
} overtime_bus_error;

/// A reply or signal handler: `message`, the `user` pointer given, an error to fill (unused).
typedef int (*overtime_bus_handler)(overtime_bus_message *message, void *user, overtime_bus_error *error);

/// Loads libsystemd: 0, or -1 with the reason in `error`.
int overtime_bus_load(char *error, size_t capacity);

/// Connects to the system bus (`$DBUS_SYSTEM_BUS_ADDRESS`, else systemd's default): 0 or -errno.
int overtime_bus_open_system(overtime_bus **bus);
/// Connects to the bus at `address` (D-Bus address syntax, `unix:path=…`) as a client: 0 or -errno.
int overtime_bus_open_address(overtime_bus **bus, const char *address);
/// Flushes what is queued (without waiting) and closes.
void overtime_bus_close(overtime_bus *bus);
/// The connection's descriptor, the poll events it waits for, and when sd-bus must run
/// again (CLOCK_MONOTONIC µs, UINT64_MAX for never).
int overtime_bus_get_fd(overtime_bus *bus);
int overtime_bus_get_events(overtime_bus *bus);
int overtime_bus_get_timeout(overtime_bus *bus, uint64_t *usec);
/// One step of reading, writing and dispatching: > 0 more to do, 0 idle, < 0 -errno.
int overtime_bus_process(overtime_bus *bus);

/// Calls logind's manager `Inhibit(what, who, why, mode)` asynchronously; `handler` gets
/// the reply.
int overtime_bus_call_inhibit(
    overtime_bus *bus, overtime_bus_slot **slot, const char *what, const char *who, const char *why,
    const char *mode, overtime_bus_handler handler, void *user);
/// Calls `Properties.Get(interface, property)` on `destination`'s object `path`, asynchronously.
int overtime_bus_call_get_property(
    overtime_bus *bus, overtime_bus_slot **slot, const char *destination, const char *path, const char *interface,
    const char *property, overtime_bus_handler handler, void *user);
/// Calls `method` (no arguments) on `destination`'s object `path`, asynchronously.
int overtime_bus_call_no_arguments(
    overtime_bus *bus, overtime_bus_slot **slot, const char *destination, const char *path, const char *interface,
    const char *method, overtime_bus_handler handler, void *user);
/// Calls logind's manager `GetSession(id)` asynchronously (its reply is an object path).
int overtime_bus_call_get_session(
    overtime_bus *bus, overtime_bus_slot **slot, const char *id, overtime_bus_handler handler, void *user);
/// Subscribes to the bus's `NameOwnerChanged` for the one bus name `name` (arg0): the
/// service appearing, going or changing hands. -EINVAL for a name that cannot be matched.
int overtime_bus_match_name_owner_changed(
    overtime_bus *bus, overtime_bus_slot **slot, const char *name, overtime_bus_handler handler, void *user);
/// Asks the bus which connection owns `name` (`GetNameOwner`; a unique name, or an error
/// `NameHasNoOwner`).
int overtime_bus_call_get_name_owner(
    overtime_bus *bus, overtime_bus_slot **slot, const char *name, overtime_bus_handler handler, void *user);
/// The unique name of the connection that sent `message` (the bus driver's messages:
/// `org.freedesktop.DBus`), as the bus daemon stamped it; NULL when it has none.
const char *overtime_bus_message_sender(overtime_bus_message *message);
/// Reads a string (`s`; owned by the message): 0 or -errno.
int overtime_bus_read_string(overtime_bus_message *message, const char **text);
/// Reads `NameOwnerChanged`'s name and new owner (owned by the message): 0 or -errno.
int overtime_bus_read_name_owner_changed(overtime_bus_message *message, const char **name, const char **owner);
/// Subscribes to the signal `member` of `interface` that `sender` (a well-known name) sends from `path`.
int overtime_bus_match_signal(
    overtime_bus *bus, overtime_bus_slot **slot, const char *sender, const char *path, const char *interface,
    const char *member, overtime_bus_handler handler, void *user);
void overtime_bus_slot_unref(overtime_bus_slot *slot);

/// When `message` is an error reply: 1 with its name and text (owned by the message), else 0.
int overtime_bus_message_error(overtime_bus_message *message, const char **name, const char **text);
/// Reads a descriptor (`h`) and returns a duplicate the caller owns (close-on-exec), or -errno.
int overtime_bus_read_fd(overtime_bus_message *message);
/// Reads a boolean (`b`): 0 or 1, or -errno.
int overtime_bus_read_bool(overtime_bus_message *message);
/// Reads a variant holding an unsigned 64-bit integer (`v` of `t`): 0 or -errno.
int overtime_bus_read_variant_u64(overtime_bus_message *message, uint64_t *value);
/// Reads a variant holding an unsigned 32-bit integer (`v` of `u`): 0 or -errno.
int overtime_bus_read_variant_u32(overtime_bus_message *message, uint32_t *value);
/// Reads a variant holding a boolean (`v` of `b`): 0 or 1, or -errno.
int overtime_bus_read_variant_bool(overtime_bus_message *message);
/// Reads an object path (`o`; owned by the message): 0 or -errno.
int overtime_bus_read_object_path(overtime_bus_message *message, const char **path);
#endif
