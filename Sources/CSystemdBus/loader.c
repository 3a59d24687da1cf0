// Loads libsystemd.so.0 on first use and calls sd-bus through the pointers found (see the header).
#include "CSystemdBus.h"
#include <CSharedLibrary.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const char *destination = "org.freedesktop.login1";
static const char *path = "/org/freedesktop/login1";
static const char *manager = "org.freedesktop.login1.Manager";

static struct {
    int (*open_system)(overtime_bus **, const char *);
    int (*new_bus)(overtime_bus **);
    int (*set_address)(overtime_bus *, const char *);
    int (*set_bus_client)(overtime_bus *, int);
    int (*start)(overtime_bus *);
    overtime_bus *(*flush_close_unref)(overtime_bus *);
    int (*get_fd)(overtime_bus *);
    int (*get_events)(overtime_bus *);
    int (*get_timeout)(overtime_bus *, uint64_t *);
    int (*process)(overtime_bus *, overtime_bus_message **);
    int (*call_method_async)(
        overtime_bus *, overtime_bus_slot **, const char *, const char *, const char *, const char *,
        overtime_bus_handler, void *, const char *, ...);
    int (*match_signal_async)(
        overtime_bus *, overtime_bus_slot **, const char *, const char *, const char *, const char *,
        overtime_bus_handler, overtime_bus_handler, void *);
    int (*add_match_async)(overtime_bus *, overtime_bus_slot **, const char *, overtime_bus_handler, overtime_bus_handler, void *);
    const char *(*message_get_sender)(overtime_bus_message *);
    overtime_bus_slot *(*slot_unref)(overtime_bus_slot *);
    int (*message_is_method_error)(overtime_bus_message *, const char *);
    const overtime_bus_error *(*message_get_error)(overtime_bus_message *);
    int (*message_read)(overtime_bus_message *, const char *, ...);
} sd;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[256];

static void load(void) {
    struct overtime_symbol symbols[] = {
        {"sd_bus_open_system_with_description", (void **)&sd.open_system},
        {"sd_bus_new", (void **)&sd.new_bus},
        {"sd_bus_set_address", (void **)&sd.set_address},
        {"sd_bus_set_bus_client", (void **)&sd.set_bus_client},
        {"sd_bus_start", (void **)&sd.start},
        {"sd_bus_flush_close_unref", (void **)&sd.flush_close_unref},
        {"sd_bus_get_fd", (void **)&sd.get_fd},
        {"sd_bus_get_events", (void **)&sd.get_events},
        {"sd_bus_get_timeout", (void **)&sd.get_timeout},
        {"sd_bus_process", (void **)&sd.process},
        {"sd_bus_call_method_async", (void **)&sd.call_method_async},
        {"sd_bus_match_signal_async", (void **)&sd.match_signal_async},
        {"sd_bus_add_match_async", (void **)&sd.add_match_async},
        {"sd_bus_message_get_sender", (void **)&sd.message_get_sender},
        {"sd_bus_slot_unref", (void **)&sd.slot_unref},
        {"sd_bus_message_is_method_error", (void **)&sd.message_is_method_error},
        {"sd_bus_message_get_error", (void **)&sd.message_get_error},
        {"sd_bus_message_read", (void **)&sd.message_read},
    };
    overtime_load_library("libsystemd.so.0", symbols, sizeof symbols / sizeof symbols[0], failure, sizeof failure);
}

int overtime_bus_load(char *error, size_t capacity) {
    pthread_once(&once, load);
    return overtime_load_outcome(failure, error, capacity);
}

int overtime_bus_open_system(overtime_bus **bus) { return sd.open_system(bus, "overtime"); }
int overtime_bus_open_address(overtime_bus **bus, const char *address) {
    overtime_bus *made = NULL;
    int result = sd.new_bus(&made);
    if (result < 0) return result;
    if ((result = sd.set_address(made, address)) < 0 || (result = sd.set_bus_client(made, 1)) < 0 ||
        (result = sd.start(made)) < 0) {
        sd.flush_close_unref(made);
        return result;
    }
    *bus = made;
    return 0;
}

void overtime_bus_close(overtime_bus *bus) { sd.flush_close_unref(bus); }
int overtime_bus_get_fd(overtime_bus *bus) { return sd.get_fd(bus); }
int overtime_bus_get_events(overtime_bus *bus) { return sd.get_events(bus); }
int overtime_bus_get_timeout(overtime_bus *bus, uint64_t *usec) { return sd.get_timeout(bus, usec); }
int overtime_bus_process(overtime_bus *bus) { return sd.process(bus, NULL); }

int overtime_bus_call_inhibit(
    overtime_bus *bus, overtime_bus_slot **slot, const char *what, const char *who, const char *why,
    const char *mode, overtime_bus_handler handler, void *user) {
    return sd.call_method_async(
        bus, slot, destination, path, manager, "Inhibit", handler, user, "ssss", what, who, why, mode);
}

int overtime_bus_call_get_property(
    overtime_bus *bus, overtime_bus_slot **slot, const char *to, const char *object, const char *interface,
    const char *property, overtime_bus_handler handler, void *user) {
    return sd.call_method_async(
        bus, slot, to, object, "org.freedesktop.DBus.Properties", "Get", handler, user, "ss", interface, property);
}

int overtime_bus_call_no_arguments(
    overtime_bus *bus, overtime_bus_slot **slot, const char *to, const char *object, const char *interface,
    const char *method, overtime_bus_handler handler, void *user) {
    return sd.call_method_async(bus, slot, to, object, interface, method, handler, user, NULL);
}

int overtime_bus_call_get_session(
    overtime_bus *bus, overtime_bus_slot **slot, const char *id, overtime_bus_handler handler, void *user) {
    return sd.call_method_async(bus, slot, destination, path, manager, "GetSession", handler, user, "s", id);
}

int overtime_bus_match_signal(
    overtime_bus *bus, overtime_bus_slot **slot, const char *sender, const char *object, const char *interface,
    const char *member, overtime_bus_handler handler, void *user) {
    return sd.match_signal_async(bus, slot, sender, object, interface, member, handler, NULL, user);
}

int overtime_bus_match_name_owner_changed(
    overtime_bus *bus, overtime_bus_slot **slot, const char *name, overtime_bus_handler handler, void *user) {
    // arg0 names the one service followed: the bus sends nothing for every other client
    // that comes and goes. Bus names are [A-Za-z0-9_.-], so nothing in `name` needs quoting.
    char match[512];
    int length = snprintf(
        match, sizeof match,
        "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
        "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='%s'",
        name);
    if (length < 0 || (size_t)length >= sizeof match || strchr(name, '\'') || strchr(name, '\\')) return -EINVAL;
    return sd.add_match_async(bus, slot, match, handler, NULL, user);
}

int overtime_bus_call_get_name_owner(
    overtime_bus *bus, overtime_bus_slot **slot, const char *name, overtime_bus_handler handler, void *user) {
    return sd.call_method_async(
        bus, slot, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", handler,
        user, "s", name);
}

const char *overtime_bus_message_sender(overtime_bus_message *message) { return sd.message_get_sender(message); }

int overtime_bus_read_string(overtime_bus_message *message, const char **text) {
    int result = sd.message_read(message, "s", text);
    return result < 0 ? result : 0;
}

int overtime_bus_read_name_owner_changed(overtime_bus_message *message, const char **name, const char **owner) {
    const char *old = NULL;
    int result = sd.message_read(message, "sss", name, &old, owner);
    return result < 0 ? result : 0;
}

void overtime_bus_slot_unref(overtime_bus_slot *slot) { sd.slot_unref(slot); }

int overtime_bus_message_error(overtime_bus_message *message, const char **name, const char **text) {
    if (sd.message_is_method_error(message, NULL) <= 0) return 0;
    const overtime_bus_error *error = sd.message_get_error(message);
    *name = error && error->name ? error->name : "";
    *text = error && error->message ? error->message : "";
    return 1;
}

int overtime_bus_read_fd(overtime_bus_message *message) {
    int fd = -1;
    int result = sd.message_read(message, "h", &fd);
    if (result < 0) return result;
    int owned = fcntl(fd, F_DUPFD_CLOEXEC, 3);  // the message's own closes with it
    return owned < 0 ? -errno : owned;
}

int overtime_bus_read_bool(overtime_bus_message *message) {
    int value = 0;
    int result = sd.message_read(message, "b", &value);
    return result < 0 ? result : (value != 0);
}

int overtime_bus_read_variant_u64(overtime_bus_message *message, uint64_t *value) {
    int result = sd.message_read(message, "v", "t", value);
    return result < 0 ? result : 0;
}

int overtime_bus_read_variant_u32(overtime_bus_message *message, uint32_t *value) {
    int result = sd.message_read(message, "v", "u", value);
    return result < 0 ? result : 0;
}

int overtime_bus_read_variant_bool(overtime_bus_message *message) {
    int value = 0;
    int result = sd.message_read(message, "v", "b", &value);
    return result < 0 ? result : (value != 0);
}

int overtime_bus_read_object_path(overtime_bus_message *message, const char **path) {
    int result = sd.message_read(message, "o", path);
    return result < 0 ? result : 0;
}
