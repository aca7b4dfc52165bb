// The server's JSON API. The token (when the server has one) travels as the cookie it set.
export async function api(path, params = {}) {
  const query = new URLSearchParams(
    Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""),
  ).toString();
  const response = await fetch(`api/${path}${query ? `?${query}` : ""}`, { credentials: "same-origin" });
  const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}
