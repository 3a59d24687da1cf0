/* The ceiling of the scheduler rows on this disk: the state changes Overtime's SQLite store
 * makes, done by the smallest program that makes them durably (WAL, synchronous=FULL, as
 * Overtime's), with nothing else — no plan, no grant, no handler.
 *
 *   sqlite_limit FOLDER submit N     N one-shots inserted, one transaction each: per second
 *   sqlite_limit FOLDER batched N    the same, 1,000 a transaction: per second
 *   sqlite_limit FOLDER runs N       N one-shots due (inserted first, not timed), then run in
 *                                    batches of 1,000 as Overtime's store commits them: one
 *                                    transaction marks a batch started (its run IDs), one ends
 *                                    it (finished, an attempt in the history): runs per second
 *
 * Prints {"value": …}. Build: cc -O2 -o sqlite_limit sqlite_limit.c -lsqlite3
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static sqlite3 *db;

static void fail(const char *what) {
    fprintf(stderr, "sqlite_limit: %s: %s\n", what, sqlite3_errmsg(db));
    exit(1);
}

static void run(const char *sql) {
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) fail(sql);
}

static sqlite3_stmt *prepare(const char *sql) {
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK) fail(sql);
    return statement;
}

static void step(sqlite3_stmt *statement) {
    if (sqlite3_step(statement) != SQLITE_DONE) fail("step");
    sqlite3_reset(statement);
}

static double now(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return time.tv_sec + time.tv_nsec / 1e9;
}

static long long wall_ns(void) {
    struct timespec time;
    clock_gettime(CLOCK_REALTIME, &time);
    return time.tv_sec * 1000000000LL + time.tv_nsec;
}

/* Inserts requests first..first+count-1, `per` to a transaction. */
static void insert(sqlite3_stmt *statement, long first, long count, long per, long long due) {
    char identifier[32];
    for (long index = first; index < first + count; index++) {
        if ((index - first) % per == 0) run("BEGIN");
        snprintf(identifier, sizeof identifier, "job-%ld", index);
        sqlite3_bind_text(statement, 1, identifier, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(statement, 2, due);
        step(statement);
        if ((index - first) % per == per - 1 || index == first + count - 1) run("COMMIT");
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: sqlite_limit FOLDER submit|batched|runs N\n");
        return 64;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/limit.db", argv[1]);
    remove(path);
    if (sqlite3_open(path, &db) != SQLITE_OK) fail("open");
    run("PRAGMA journal_mode = WAL");
    run("PRAGMA synchronous = FULL");
    run("CREATE TABLE requests (identifier TEXT PRIMARY KEY, due_at INTEGER, running INTEGER NOT NULL DEFAULT 0,"
        " finished INTEGER NOT NULL DEFAULT 0, run_id INTEGER, started_at INTEGER)");
    run("CREATE INDEX requests_due ON requests (due_at) WHERE due_at IS NOT NULL AND running = 0");
    run("CREATE TABLE history (identifier TEXT NOT NULL, run_id INTEGER NOT NULL, attempt INTEGER NOT NULL,"
        " started_at INTEGER NOT NULL, ended_at INTEGER, result TEXT NOT NULL,"
        " PRIMARY KEY (identifier, run_id, attempt))");
    sqlite3_stmt *add = prepare("INSERT INTO requests (identifier, due_at) VALUES (?, ?)");
    long count = atol(argv[3]);
    double value;
    if (strcmp(argv[2], "submit") == 0 || strcmp(argv[2], "batched") == 0) {
        long per = strcmp(argv[2], "submit") == 0 ? 1 : 1000;
        double started = now();
        insert(add, 0, count, per, wall_ns() + 86400000000000LL);
        value = count / (now() - started);
    } else if (strcmp(argv[2], "runs") == 0) {
        insert(add, 0, count, 1000, wall_ns());
        sqlite3_stmt *due = prepare(
            "SELECT rowid, identifier FROM requests WHERE due_at <= ? AND running = 0 ORDER BY due_at LIMIT 1000");
        sqlite3_stmt *start =
            prepare("UPDATE requests SET running = 1, due_at = NULL, run_id = ?, started_at = ? WHERE rowid = ?");
        sqlite3_stmt *end = prepare("UPDATE requests SET running = 0, finished = 1 WHERE rowid = ?");
        sqlite3_stmt *record = prepare(
            "INSERT INTO history (identifier, run_id, attempt, started_at, ended_at, result)"
            " VALUES (?, ?, 1, ?, ?, 'succeeded')");
        long long rows[1000];
        char identifiers[1000][32];
        long long run_id = 0;
        double started = now();
        for (;;) {
            sqlite3_bind_int64(due, 1, wall_ns());
            int found = 0;
            while (sqlite3_step(due) == SQLITE_ROW) {
                rows[found] = sqlite3_column_int64(due, 0);
                snprintf(identifiers[found], 32, "%s", (const char *)sqlite3_column_text(due, 1));
                found++;
            }
            sqlite3_reset(due);
            if (found == 0) break;
            long long at = wall_ns();
            run("BEGIN");
            for (int index = 0; index < found; index++) {
                sqlite3_bind_int64(start, 1, run_id + index + 1);
                sqlite3_bind_int64(start, 2, at);
                sqlite3_bind_int64(start, 3, rows[index]);
                step(start);
            }
            run("COMMIT");
            long long ended = wall_ns();
            run("BEGIN");
            for (int index = 0; index < found; index++) {
                sqlite3_bind_int64(end, 1, rows[index]);
                step(end);
                sqlite3_bind_text(record, 1, identifiers[index], -1, SQLITE_TRANSIENT);
                sqlite3_bind_int64(record, 2, run_id + index + 1);
                sqlite3_bind_int64(record, 3, at);
                sqlite3_bind_int64(record, 4, ended);
                step(record);
            }
            run("COMMIT");
            run_id += found;
        }
        value = count / (now() - started);
    } else {
        fprintf(stderr, "sqlite_limit: unknown scenario %s\n", argv[2]);
        return 64;
    }
    printf("{\"value\": %.1f}\n", value);
    sqlite3_close(db);
    return 0;
}
