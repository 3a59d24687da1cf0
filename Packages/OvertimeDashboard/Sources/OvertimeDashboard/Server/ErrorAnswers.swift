// The server's own answers (no such page, no such method, a body too large) made the
// dashboard's: with the headers every answer of it carries. In the dashboard's own
// application only: an application the dashboard is mounted in answers its errors itself.

import HTTPTypes
import Hummingbird

struct ErrorAnswers<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as any HTTPResponseError {
            let status = error.status
            return HTTPAnswers.plain(status == .notFound ? "no such page" : status.reasonPhrase, status: status)
        }
    }
}
