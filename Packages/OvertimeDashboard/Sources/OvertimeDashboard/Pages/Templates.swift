// The pages' Mustache templates, compiled in (one binary to deploy, no template folder to
// lose). `{{value}}` escapes HTML; no template uses `{{{…}}}`, so nothing a request, an
// identifier, an output or an error holds can become markup.

enum Templates {
    static let all: [String: String] = [
        "top": top, "bottom": bottom, "overview": overview, "requests": requests, "running": running,
        "progress": progress,
        "history": history, "failed": failed, "instances": instances, "story": story, "confirm": confirm,
        "message": message, "actions": actions, "login": login, "pager": pager,
    ]

    static let top = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} · {{site}}</title><link rel="stylesheet" href="{{base}}/assets/dashboard.css"></head>
        <body{{#user}} data-events="{{base}}/events"{{/user}}>
        <header><a class="brand" href="{{base}}/overview">{{site}}</a>
        <nav>{{#nav}}<a href="{{base}}{{path}}"{{#current}} aria-current="page"{{/current}}>{{label}}</a>{{/nav}}</nav>
        {{#user}}<span class="live-status" data-live-status role="status"></span>{{/user}}
        {{#user}}<form method="post" action="{{base}}/logout" class="who"><span>{{user}}</span>\
        {{#readOnly}} <span class="badge">read-only</span>{{/readOnly}}{{#signedIn}}<input type="hidden" name="csrf" value="{{csrf}}"> \
        <button>Sign out</button>{{/signedIn}}</form>{{/user}}
        </header>
        <main data-page="{{page}}">
        {{#ownerProblem}}<p class="owner-down" role="alert" data-owner-down>{{ownerProblem}} Run now, cancel and retry \
        cannot be done until it answers.</p>{{/ownerProblem}}
        <h1>{{title}}</h1>

        """

    static let bottom = """
        <p class="updated">Read at {{readAt}}.</p>
        </main>
        <script src="{{base}}/assets/live.js"></script>
        </body></html>

        """

    /// The schedule at a glance: counts by state, the last hour's attempts as a chart drawn
    /// here (SVG, no script), the unfinished requests by handler and, for a fleet, its
    /// instances.
    static let overview = """
        {{> top}}
        <ul class="tiles">{{#tiles}}<li class="tile {{kind}}"><a href="{{base}}{{href}}"><strong>{{count}}</strong> \
        <span>{{label}}</span></a></li>{{/tiles}}</ul>
        <h2>Attempts in the last hour</h2>
        {{#chart}}<figure class="chart"><svg viewBox="0 0 {{width}} {{height}}" role="img" aria-label="{{summary}}">\
        <line class="axis" x1="0" y1="{{plotHeight}}" x2="{{width}}" y2="{{plotHeight}}"></line>
        {{#bars}}<g><title>{{title}}</title><rect class="ended" x="{{x}}" y="{{endedY}}" width="{{width}}" height="{{endedHeight}}"></rect>\
        <rect class="failed" x="{{x}}" y="{{failedY}}" width="{{width}}" height="{{failedHeight}}"></rect></g>
        {{/bars}}</svg><div class="times"><span>an hour ago</span><span>30 min</span><span>now</span></div>
        <figcaption><span class="key ended"></span> {{ended}} attempts ended, <span class="key failed"></span> {{failed}} failed \
        (failed, expired or terminated). The top of the chart is {{top}} a minute.</figcaption></figure>{{/chart}}
        {{#lateness}}<p class="lateness" data-lateness>Lateness, from due time to start, of the {{started}} runs         started in the last hour: half within <strong>{{median}}</strong>, 99 in 100 within <strong>{{percentile99}}</strong>.</p>{{/lateness}}        {{^lateness}}<p class="lateness note" data-lateness>No run that was due started in the last hour.</p>{{/lateness}}
        <h2>Waiting and running, by handler</h2>
        <div class="scroll"><table><thead><tr><th>Handler</th><th>Kind</th><th>Waiting</th><th>Running</th></tr></thead><tbody>
        {{#handlers}}<tr{{#unserved}} class="unserved"{{/unserved}}><td>{{#href}}<a href="{{base}}{{href}}">{{name}}</a>{{/href}}{{^href}}{{name}}{{/href}}</td>\
        <td>{{kind}}</td><td>{{waiting}}</td><td>{{running}}</td></tr>
        {{/handlers}}{{^handlers}}<tr><td colspan="4" class="empty">{{#handlersRecorded}}Nothing is waiting or running.{{/handlersRecorded}}\
        {{^handlersRecorded}}No program of this build has recorded its handlers in this schedule yet.{{/handlersRecorded}}</td></tr>{{/handlers}}
        </tbody></table></div>
        {{#hasTags}}<h2>Waiting and running, by tag</h2>
        <div class="scroll"><table class="tags"><thead><tr><th>Tag</th><th>Waiting</th><th>Running</th></tr></thead><tbody>
        {{#tags}}<tr><td><a href="{{base}}{{href}}">{{tag}}</a></td><td>{{waiting}}</td><td>{{running}}</td></tr>
        {{/tags}}</tbody></table></div>
        {{#moreTags}}<p class="note">And {{.}} tags more, with fewer requests each.</p>{{/moreTags}}{{/hasTags}}
        {{#fleet}}<h2>Instances</h2>
        <div class="scroll"><table><thead><tr><th>Instance</th><th>Health</th><th>Runs held</th><th>Last seen</th></tr></thead><tbody>
        {{#instances}}<tr><td>{{name}}</td><td><span class="state {{#down}}failed{{/down}}{{^down}}succeeded{{/down}}">{{health}}</span></td>\
        <td>{{claims}}</td><td>{{lastSeen}}</td></tr>
        {{/instances}}{{^instances}}<tr><td colspan="4" class="empty">No instance is connected.</td></tr>{{/instances}}
        </tbody></table></div>{{/fleet}}
        {{> bottom}}
        """

    static let requests = """
        {{> top}}
        <form method="get" action="{{base}}/requests" class="filters">
        <label>State <select name="state">{{#states}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/states}}</select></label>
        <label>Identifier starts with <input name="prefix" value="{{prefix}}"></label>
        <label>Tag <input name="tag" value="{{tag}}"></label>
        <label>Identifier or tag contains <input type="search" name="q" value="{{search}}"></label>
        <label>Order <select name="order">{{#orders}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/orders}}</select></label>
        <button>Show</button></form>
        {{#total}}<p class="total" data-total>{{total}}</p>{{/total}}
        <div class="scroll"><table><thead><tr><th>Identifier</th><th>State</th>\
        {{#sortedBy}}<th{{#nextRun.ariaSort}} aria-sort="{{.}}"{{/nextRun.ariaSort}}><a class="sort" href="{{nextRun.link}}" title="Sort by next run, soonest first">Next run</a></th>\
        <th>Waits for</th><th{{#attempt.ariaSort}} aria-sort="{{.}}"{{/attempt.ariaSort}}><a class="sort" href="{{attempt.link}}" title="Sort by attempt, highest first">Attempt</a></th>\
        <th{{#lastRun.ariaSort}} aria-sort="{{.}}"{{/lastRun.ariaSort}}><a class="sort" href="{{lastRun.link}}" title="Sort by last run, latest first">Last run</a></th>{{/sortedBy}}<th>Tags</th></tr></thead><tbody>
        {{#rows}}<tr><td><a href="{{base}}/request?id={{link}}">{{identifier}}</a></td><td><span class="state {{state}}">{{state}}</span></td>\
        <td>{{#next}}<time title="{{next}}">{{nextRelative}}</time>{{/next}}</td><td>{{waitsFor}}</td><td>{{attempt}}</td>\
        <td>{{#lastRun}}<time title="{{lastRun}}">{{lastRunRelative}}</time>{{/lastRun}}</td><td>{{tags}}</td></tr>
        {{/rows}}{{^rows}}<tr><td colspan="7" class="empty">No requests{{#filtered}} match{{/filtered}}.</td></tr>{{/rows}}
        </tbody></table></div>
        {{#partial}}<p class="note">A page reads a bounded number of requests for a filter no index answers: the next page reads on.</p>{{/partial}}
        {{#tagActions}}<p class="actions"><a class="button" href="{{base}}/bulk/run-tag?{{query}}">Run every pending request {{what}} now…</a> \
        <a class="button danger" href="{{base}}/bulk/cancel-tag?{{query}}">Cancel every pending request {{what}}…</a></p>{{/tagActions}}
        {{> pager}}
        {{> bottom}}
        """

    /// Links to the first, previous, next and last pages of a list.
    static let pager = """
        {{#pager}}{{#any}}<nav class="pager" aria-label="Pages">{{#first}}<a href="{{first}}">« First</a>{{/first}}\
        {{#previous}}<a href="{{previous}}" rel="prev">← Previous</a>{{/previous}}{{#next}}<a href="{{next}}" rel="next">Next →</a>{{/next}}\
        {{#last}}<a href="{{last}}">Last »</a>{{/last}}</nav>{{/any}}{{/pager}}
        """

    /// A running handler's progress (``RunningProgress``) as a bar and its text; a dash
    /// before its first report.
    static let progress = """
        {{#progress}}<progress max="100" value="{{percent}}">{{percent}} %</progress> <span>{{text}}</span>{{/progress}}\
        {{^progress}}—{{/progress}}
        """

    static let running = """
        {{> top}}
        <div class="scroll"><table><thead><tr><th>Identifier</th><th>Run</th><th>Attempt</th><th>Started</th><th>Progress</th><th>Time left in its grant</th><th>Instance</th></tr></thead><tbody>
        {{#rows}}<tr><td><a href="{{base}}/request?id={{link}}">{{identifier}}</a></td><td>{{runID}}</td><td>{{attempt}}</td>\
        <td><time title="{{started}}">{{startedRelative}}</time></td><td class="progress">{{> progress}}</td><td>{{timeLeft}}</td><td>{{holder}}</td></tr>
        {{/rows}}{{^rows}}<tr><td colspan="7" class="empty">Nothing is running.</td></tr>{{/rows}}
        </tbody></table></div>
        {{> bottom}}
        """

    static let history = """
        {{> top}}
        <form method="get" action="{{base}}/history" class="filters">
        <label>Identifier starts with <input name="prefix" value="{{prefix}}"></label>
        <label>Result <select name="result">{{#results}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/results}}</select></label>
        <label>Started from (UTC) <input type="datetime-local" name="from" value="{{from}}"></label>
        <label>until <input type="datetime-local" name="until" value="{{until}}"></label>
        <label>Identifier, stop reason or output contains <input type="search" name="q" value="{{search}}"></label>
        <button>Show</button></form>
        {{#total}}<p class="total" data-total>{{total}}</p>{{/total}}
        <div class="scroll"><table><thead><tr><th>Identifier</th><th>Run</th><th>Attempt</th><th>Started</th><th>Took</th><th>Result</th><th>Stop reason</th></tr></thead><tbody>
        {{#rows}}<tr><td><a href="{{base}}/request?id={{link}}">{{identifier}}</a></td><td>{{runID}}</td><td>{{attempt}}</td>\
        <td><time title="{{started}}">{{startedRelative}}</time></td><td>{{took}}</td><td><span class="result {{result}}">{{result}}</span></td><td>{{stopReason}}</td></tr>
        {{/rows}}{{^rows}}<tr><td colspan="7" class="empty">No attempts{{#filtered}} match{{/filtered}}.</td></tr>{{/rows}}
        </tbody></table></div>
        {{#searchedTo}}<p class="note">{{searchedTo}}</p>{{/searchedTo}}
        {{> pager}}
        {{> bottom}}
        """

    static let failed = """
        {{> top}}
        <p>Requests that finished without succeeding: their last run failed with no retry left, or a prerequisite's failure or cancellation stopped them.</p>
        <form method="get" action="{{base}}/failed" class="filters">
        <label>Identifier starts with <input name="prefix" value="{{prefix}}"></label>
        <label>Tag <input name="tag" value="{{tag}}"></label>
        <label>Order <select name="order">{{#orders}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/orders}}</select></label>
        <button>Show</button></form>
        {{#total}}<p class="total" data-total>{{total}}</p>{{/total}}
        <div class="scroll"><table><thead><tr><th>Identifier</th><th>Last attempt</th><th>Ended</th><th>Stop reason</th><th>Stopped by</th><th></th></tr></thead><tbody>
        {{#rows}}<tr><td><a href="{{base}}/request?id={{link}}">{{identifier}}</a></td><td>{{lastResult}}</td><td>{{ended}}</td><td>{{stopReason}}</td><td>{{stoppedBy}}</td>\
        <td>{{#canRetry}}<a href="{{base}}/request/retry?id={{link}}">Retry…</a>{{/canRetry}}</td></tr>
        {{/rows}}{{^rows}}<tr><td colspan="6" class="empty">Nothing failed for good.</td></tr>{{/rows}}
        </tbody></table></div>
        {{#retryAll}}<p class="actions"><a class="button" href="{{base}}/bulk/retry-failed?{{query}}">Retry every request that failed for good{{what}}…</a></p>{{/retryAll}}
        {{> pager}}
        {{> bottom}}
        """

    static let instances = """
        {{> top}}
        {{#single}}<p>One daemon owns this schedule (a SQLite store): there is no fleet of instances.</p>{{/single}}
        {{^single}}<p>Instances of the fleet sharing this schedule: those connected to its database, those holding runs, and those whose own requests it keeps. An instance no process runs as any more can be retired: its own requests are removed.</p>
        <div class="scroll"><table><thead><tr><th>Instance</th><th>Own requests</th><th>Runs held</th><th>Claims until</th><th>Connections</th><th>Last seen</th>{{#canAct}}<th></th>{{/canAct}}</tr></thead><tbody>
        {{#rows}}<tr><td>{{name}}</td><td>{{requests}}</td><td>{{claims}}</td><td>{{claimsUntil}}</td><td>{{connections}}</td><td>{{lastSeen}}</td>{{#canAct}}<td>{{#canRetire}}<a class="button danger" href="{{base}}/instance/retire?id={{link}}">Retire…</a>{{/canRetire}}</td>{{/canAct}}</tr>
        {{/rows}}{{^rows}}<tr><td colspan="7" class="empty">No instance is connected.</td></tr>{{/rows}}
        </tbody></table></div>{{/single}}
        {{> bottom}}
        """

    static let story = """
        {{> top}}
        {{#request}}
        <dl class="facts">
        <dt>State</dt><dd><span class="state {{state}}">{{state}}</span></dd>
        {{#waitsFor}}<dt>Waits for</dt><dd>{{waitsFor}}</dd>{{/waitsFor}}
        {{#next}}<dt>Next run</dt><dd><time title="{{next}}">{{nextRelative}}</time> ({{next}})</dd>{{/next}}
        {{#running}}<dt>Running</dt><dd>run {{runID}}, attempt {{attempt}}, since {{started}}; {{timeLeft}} left in its grant</dd>\
        {{#progress}}<dt>Progress</dt><dd class="progress">{{> progress}}</dd>{{/progress}}{{/running}}
        <dt>Repeats</dt><dd>{{repeats}}</dd>
        {{#requirements}}<dt>Requirements</dt><dd>{{requirements}}</dd>{{/requirements}}
        {{#prerequisites}}<dt>Prerequisites</dt><dd>{{prerequisites}}</dd>{{/prerequisites}}
        {{#tags}}<dt>Tags</dt><dd>{{tags}}</dd>{{/tags}}
        <dt>Submitted</dt><dd>{{submitted}}</dd>
        {{#cancelled}}<dt>Cancelled</dt><dd>{{cancelled}}</dd>{{/cancelled}}
        {{#stoppedBy}}<dt>Stopped by</dt><dd>prerequisite {{stoppedBy}}</dd>{{/stoppedBy}}
        <dt>Retries</dt><dd>{{retry}}</dd>
        <dt>Longest run</dt><dd>{{maximumDuration}}</dd>
        {{#input}}<dt>Input</dt><dd><pre>{{input}}</pre></dd>{{/input}}
        </dl>
        {{/request}}
        {{#canAct}}<p class="actions">{{#canRun}}<a class="button" href="{{base}}/request/run?id={{link}}">Run now…</a>{{/canRun}} \
        {{#canRetry}}<a class="button" href="{{base}}/request/retry?id={{link}}">Retry…</a>{{/canRetry}} \
        {{#canCancel}}<a class="button danger" href="{{base}}/request/cancel?id={{link}}">Cancel…</a>{{/canCancel}}</p>{{/canAct}}
        {{#actionsOff}}<p class="note">{{actionsOff}}</p>{{/actionsOff}}
        <h2>Attempts</h2>
        <div class="scroll"><table><thead><tr><th>Run</th><th>Attempt</th><th>Started</th><th>Took</th><th>Result</th><th>Stop reason</th><th>Output</th></tr></thead><tbody>
        {{#attempts}}<tr><td>{{runID}}</td><td>{{attempt}}</td><td><time title="{{started}}">{{startedRelative}}</time></td><td>{{took}}</td>\
        <td><span class="result {{result}}">{{result}}</span></td><td>{{stopReason}}</td><td>{{#output}}<pre>{{output}}</pre>{{/output}}</td></tr>
        {{/attempts}}{{^attempts}}<tr><td colspan="7" class="empty">No attempt yet.</td></tr>{{/attempts}}
        </tbody></table></div>
        {{#hasTaken}}<h2>Done from this dashboard</h2>
        <div class="scroll"><table><thead><tr><th>When</th><th>Who</th><th>Action</th><th>Outcome</th></tr></thead><tbody>
        {{#taken}}<tr><td>{{at}}</td><td>{{user}}</td><td>{{action}}</td><td>{{outcome}}</td></tr>
        {{/taken}}</tbody></table></div>{{/hasTaken}}
        {{> bottom}}
        """

    static let confirm = """
        {{> top}}
        <p>{{question}}</p>
        <form method="post" action="{{action}}"><input type="hidden" name="csrf" value="{{csrf}}">\
        {{#ticket}}<input type="hidden" name="ticket" value="{{ticket}}">{{/ticket}}
        <button class="{{buttonClass}}">{{button}}</button> <a href="{{back}}">Go back</a></form>
        {{> bottom}}
        """

    static let message = """
        {{> top}}
        <p class="{{kind}}">{{text}}</p>
        {{#back}}<p><a href="{{back}}">Back</a></p>{{/back}}
        {{> bottom}}
        """

    static let actions = """
        {{> top}}
        <div class="scroll"><table><thead><tr><th>When</th><th>Who</th><th>Action</th><th>Identifier</th><th>Outcome</th></tr></thead><tbody>
        {{#rows}}<tr><td>{{at}}</td><td>{{user}}</td><td>{{action}}</td><td><a href="{{href}}">{{identifier}}</a></td><td>{{outcome}}</td></tr>
        {{/rows}}{{^rows}}<tr><td colspan="5" class="empty">No action taken since the dashboard started.</td></tr>{{/rows}}
        </tbody></table></div>
        <h2>Recorded by the scheduler</h2>
        <p>What operators did through the scheduler's control commands — from any dashboard or <code>overtimectl</code> — as its store keeps it.</p>
        {{#recordedError}}<p class="error">{{recordedError}}</p>{{/recordedError}}
        <div class="scroll"><table><thead><tr><th>When</th><th>Who</th><th>Action</th><th>Subject</th><th>Requests</th><th>Outcome</th></tr></thead><tbody>
        {{#recorded}}<tr><td>{{at}}</td><td>{{by}}</td><td>{{action}}</td><td>{{subject}}</td><td>{{count}}</td><td>{{outcome}}</td></tr>
        {{/recorded}}{{^recorded}}<tr><td colspan="6" class="empty">None recorded.</td></tr>{{/recorded}}
        </tbody></table></div>
        {{> bottom}}
        """

    static let login = """
        {{> top}}
        {{#failed}}<p class="error">That token is not known here.</p>{{/failed}}
        <form method="post" action="{{base}}/login" class="login">
        <label>Token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
        <button>Sign in</button></form>
        {{> bottom}}
        """
}
