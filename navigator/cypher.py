"""All Cypher Wayfinder runs. Parameters only, never string building.

Graph: (:Space {id, key, name, url}) -[:ROOT_PAGE {position}]-> (:Page) for top-level pages,
(:Page)-[:PARENT_OF {position}]->(:Page) for the tree, (:Space)-[:HAS_PAGE]->(:Page) for
membership, (:Page)-[:LINKS_TO]->(:Page) for the links in a page's text, and
(:Page)-[:HAS_IMAGE]->(:Image {id, page_id, space_id, filename, media_type, alt_text, sha256, data})
for the images a page shows. Jira the same way: (:Project {id, key, name, url}) -[:ROOT_ISSUE
{position}]-> (:Issue) for issues without a parent (epics, and issues in no epic),
(:Issue)-[:PARENT_OF {position}]->(:Issue) for epic → issue → sub-task, (:Project)-[:HAS_ISSUE]->
(:Issue), (:Issue)-[:LINKS_ISSUE]->(:Issue) for issue links, (:Issue)-[:HAS_COMMENT]->(:Comment) for
its comments restricted to a role or a group (documents of their own, outside the tree), (:Page)-[:MENTIONS]->(:Issue) for the
issue keys a page's text names. An issue's ``space_id`` holds its project's id, so pages and issues are placed alike.
Ids are Wayfinder's typed ids ("space:HIVE", "page:27362069", "project:HIVE", "issue:HIVE-1234").
"""

SCHEMA = (
    "CREATE CONSTRAINT space_id IF NOT EXISTS FOR (s:Space) REQUIRE s.id IS UNIQUE",
    "CREATE CONSTRAINT page_id IF NOT EXISTS FOR (p:Page) REQUIRE p.id IS UNIQUE",
    "CREATE INDEX page_title_key IF NOT EXISTS FOR (p:Page) ON (p.title_key)",
    "CREATE CONSTRAINT project_id IF NOT EXISTS FOR (p:Project) REQUIRE p.id IS UNIQUE",
    "CREATE CONSTRAINT issue_id IF NOT EXISTS FOR (i:Issue) REQUIRE i.id IS UNIQUE",
    "CREATE INDEX issue_title_key IF NOT EXISTS FOR (i:Issue) ON (i.title_key)",
    "CREATE CONSTRAINT comment_id IF NOT EXISTS FOR (c:Comment) REQUIRE c.id IS UNIQUE",
)

MERGE_SPACE = """
MERGE (s:Space {id: $id})
SET s.key = $key, s.name = $name, s.url = $url
"""

# Pages arrive parents first. Tree edges of the batch are replaced, so moves take effect.
MERGE_PAGES = """
UNWIND $pages AS row
MATCH (s:Space {id: row.space_id})
MERGE (p:Page {id: row.id})
SET p.title = row.title, p.title_key = row.title_key, p.url = row.url, p.markdown = row.markdown, p.space_id = row.space_id, p.digest = row.digest,
    p.labels = row.labels, p.updated_at = row.updated_at
MERGE (s)-[:HAS_PAGE]->(p)
WITH p, row, s
OPTIONAL MATCH (p)<-[old:PARENT_OF|ROOT_PAGE]-()
DELETE old
WITH DISTINCT p, row, s
OPTIONAL MATCH (p)<-[moved:HAS_PAGE]-(other:Space) WHERE other <> s
DELETE moved
WITH DISTINCT p, row, s
CALL (p, row, s) {
  WITH p, row, s WHERE row.parent_id IS NULL
  MERGE (s)-[r:ROOT_PAGE]->(p) SET r.position = row.position
  UNION
  WITH p, row WHERE row.parent_id IS NOT NULL
  MATCH (parent:Page {id: row.parent_id})
  MERGE (parent)-[r:PARENT_OF]->(p) SET r.position = row.position
}
"""

# The links of the batch's pages, replaced as a whole. A link to a page not held (yet) is dropped;
# it appears with the sync that brings that page.
SET_LINKS = """
UNWIND $pages AS row
MATCH (p:Page {id: row.id})
CALL (p) {
  MATCH (p)-[old:LINKS_TO]->()
  DELETE old
}
WITH p, row
UNWIND row.links AS target
MATCH (t:Page {id: target})
MERGE (p)-[:LINKS_TO]->(t)
"""

LINKS = "MATCH (:Page {id: $id})-[:LINKS_TO]->(t:Page) RETURN t.id AS id ORDER BY t.id"

# What a page or an issue is connected with, each kind in title order, at most $limit of each:
# the pages a page links to and those linking to it, the issues a page mentions and the pages
# mentioning an issue, the issues an issue links to and those linking to it.
RELATED = """
CALL () {
  MATCH (:Page {id: $id})-[:LINKS_TO]->(t:Page) RETURN 'links_to' AS relation, t ORDER BY t.title, t.id LIMIT $limit
  UNION ALL
  MATCH (:Page {id: $id})<-[:LINKS_TO]-(t:Page) RETURN 'linked_from' AS relation, t ORDER BY t.title, t.id LIMIT $limit
  UNION ALL
  MATCH (:Page {id: $id})-[:MENTIONS]->(t:Issue) RETURN 'mentions' AS relation, t ORDER BY t.id LIMIT $limit
  UNION ALL
  MATCH (:Issue {id: $id})<-[:MENTIONS]-(t:Page) RETURN 'mentioned_in' AS relation, t ORDER BY t.title, t.id LIMIT $limit
  UNION ALL
  MATCH (:Issue {id: $id})-[:LINKS_ISSUE]->(t:Issue) RETURN 'links_to' AS relation, t ORDER BY t.id LIMIT $limit
  UNION ALL
  MATCH (:Issue {id: $id})<-[:LINKS_ISSUE]-(t:Issue) RETURN 'linked_from' AS relation, t ORDER BY t.id LIMIT $limit
}
RETURN relation, t.id AS id, t.title AS title, t.url AS url, t.space_id AS space_id
"""

# The issues each page of a space mentions, as held.
MENTIONS = """
MATCH (:Space {id: $space_id})-[:HAS_PAGE]->(p:Page)-[:MENTIONS]->(i:Issue)
RETURN p.id AS id, collect(i.id) AS issues
"""

# The mentions of the batch's pages, replaced as a whole; a mention of an issue not held is dropped.
SET_MENTIONS = """
UNWIND $pages AS row
MATCH (p:Page {id: row.id})
CALL (p) {
  MATCH (p)-[old:MENTIONS]->()
  DELETE old
}
WITH p, row
UNWIND row.issues AS target
MATCH (i:Issue {id: target})
MERGE (p)-[:MENTIONS]->(i)
"""

# The links of the batch's issues (outward), replaced as a whole; a link to an issue not held is dropped.
SET_ISSUE_LINKS = """
UNWIND $issues AS row
MATCH (i:Issue {id: row.id})
CALL (i) {
  MATCH (i)-[old:LINKS_ISSUE]->()
  DELETE old
}
WITH i, row
UNWIND row.links AS target
MATCH (t:Issue {id: target})
MERGE (i)-[:LINKS_ISSUE]->(t)
"""

# What each page of the space was last written from (a digest of everything MERGE_PAGES and
# SET_LINKS set), so a sync writes only the pages that changed.
PAGE_DIGESTS = """
MATCH (:Space {id: $space_id})-[:HAS_PAGE]->(p:Page)
RETURN p.id AS id, p.digest AS digest
"""

# Pages of the space that the source no longer reports.
PRUNE_PAGES = """
MATCH (:Space {id: $space_id})-[:HAS_PAGE]->(p:Page)
WHERE NOT p.id IN $keep
DETACH DELETE p
"""

# Every space, then every project, each by key: one round trip for both (search asks on every request).
CONTAINERS = """
MATCH (c:Space|Project)
RETURN c:Space AS space, c.key AS key, c.name AS name, c.url AS url
ORDER BY space DESC, key
"""

CHILDREN = """
CALL () {
  MATCH (:Space {id: $id})-[r:ROOT_PAGE]->(c:Page) RETURN c, r
  UNION
  MATCH (:Page {id: $id})-[r:PARENT_OF]->(c:Page) RETURN c, r
  UNION
  MATCH (:Project {id: $id})-[r:ROOT_ISSUE]->(c:Issue) RETURN c, r
  UNION
  MATCH (:Issue {id: $id})-[r:PARENT_OF]->(c:Issue) RETURN c, r
}
WITH c, r WHERE r.position > $after
RETURN c.id AS id, c.title AS title, c.url AS url, c.space_id AS space_id, r.position AS position
ORDER BY r.position
LIMIT $limit
"""

# The children of several spaces or pages, each parent's in tree order; at most $limit rows, so
# only the last parent listed may have more children than it shows.
CHILDREN_OF = """
UNWIND $ids AS parent
CALL (parent) {
  MATCH (:Space {id: parent})-[r:ROOT_PAGE]->(c:Page) RETURN c, r
  UNION
  MATCH (:Page {id: parent})-[r:PARENT_OF]->(c:Page) RETURN c, r
  UNION
  MATCH (:Project {id: parent})-[r:ROOT_ISSUE]->(c:Issue) RETURN c, r
  UNION
  MATCH (:Issue {id: parent})-[r:PARENT_OF]->(c:Issue) RETURN c, r
}
RETURN parent, c.id AS id, c.title AS title, c.url AS url, c.space_id AS space_id, r.position AS position
ORDER BY parent, position
LIMIT $limit
"""

# Pages and issues by title as a path names it (core.text.title_key), or an issue by its key.
TITLED = """
CALL () {
  MATCH (p:Page {title_key: $key}) RETURN p
  UNION
  MATCH (p:Issue {title_key: $key}) RETURN p
  UNION
  MATCH (p:Issue {id: $issue_id}) RETURN p
}
RETURN p.id AS id ORDER BY p.id LIMIT $limit
"""

# Position of a page among its siblings (resumes list_children after a visible child).
POSITION = """
CALL () {
  MATCH (parent)-[r:PARENT_OF|ROOT_PAGE]->(:Page {id: $id}) RETURN parent, r
  UNION
  MATCH (parent)-[r:PARENT_OF|ROOT_ISSUE]->(:Issue {id: $id}) RETURN parent, r
}
WITH parent, r WHERE parent.id = $parent_id
RETURN r.position AS position
"""

PAGE = """
MATCH (p:Page {id: $id})
RETURN p.id AS id, p.title AS title, p.url AS url, p.markdown AS markdown
"""

ISSUE = """
MATCH (i:Issue {id: $id})
RETURN i.id AS id, i.title AS title, i.url AS url, i.markdown AS markdown
"""

COMMENT = """
MATCH (c:Comment {id: $id})
RETURN c.id AS id, c.title AS title, c.url AS url, c.markdown AS markdown
"""

# Summaries of many pages with their ancestors from the root down, for hits and breadcrumbs.
PAGE_SUMMARIES = """
UNWIND $ids AS wanted
MATCH (p:Page {id: wanted})
OPTIONAL MATCH path = (root)-[:ROOT_PAGE|PARENT_OF*1..]->(p)
WHERE root:Space
RETURN p.id AS id, p.title AS title, p.url AS url, p.space_id AS space_id, p.labels AS labels,
       p.updated_at AS updated_at, [n IN nodes(path)[1..-1] | {id: n.id, title: n.title}] AS ancestors
"""

# Summaries of many issues with their ancestors from the project down (epic, story).
ISSUE_SUMMARIES = """
UNWIND $ids AS wanted
MATCH (i:Issue {id: wanted})
OPTIONAL MATCH path = (root)-[:ROOT_ISSUE|PARENT_OF*1..]->(i)
WHERE root:Project
RETURN i.id AS id, i.title AS title, i.url AS url, i.space_id AS space_id, i.labels AS labels,
       i.updated_at AS updated_at, [n IN nodes(path)[1..-1] | {id: n.id, title: n.title}] AS ancestors
"""

# Summaries of restricted comments, their ancestors from the project down to their issue.
COMMENT_SUMMARIES = """
UNWIND $ids AS wanted
MATCH (i:Issue)-[:HAS_COMMENT]->(c:Comment {id: wanted})
OPTIONAL MATCH path = (root)-[:ROOT_ISSUE|PARENT_OF*1..]->(i)
WHERE root:Project
RETURN c.id AS id, c.title AS title, c.url AS url, c.space_id AS space_id, [] AS labels,
       c.updated_at AS updated_at, [n IN nodes(path)[1..] | {id: n.id, title: n.title}] AS ancestors
"""

MERGE_PROJECT = """
MERGE (p:Project {id: $id})
SET p.key = $key, p.name = $name, p.url = $url
"""

# Issues arrive parents first. Tree edges of the batch are replaced, so moves take effect.
MERGE_ISSUES = """
UNWIND $issues AS row
MATCH (project:Project {id: row.space_id})
MERGE (i:Issue {id: row.id})
SET i.key = row.key, i.title = row.title, i.title_key = row.title_key, i.url = row.url, i.markdown = row.markdown,
    i.space_id = row.space_id, i.issue_type = row.issue_type, i.level = row.level, i.digest = row.digest,
    i.labels = row.labels, i.updated_at = row.updated_at
MERGE (project)-[:HAS_ISSUE]->(i)
WITH i, row, project
OPTIONAL MATCH (i)<-[old:PARENT_OF|ROOT_ISSUE]-()
DELETE old
WITH DISTINCT i, row, project
CALL (i, row, project) {
  WITH i, row, project WHERE row.parent_id IS NULL
  MERGE (project)-[r:ROOT_ISSUE]->(i) SET r.position = row.position
  UNION
  WITH i, row WHERE row.parent_id IS NOT NULL
  MATCH (parent:Issue {id: row.parent_id})
  MERGE (parent)-[r:PARENT_OF]->(i) SET r.position = row.position
}
"""

# The restricted comments of the batch's issues, replaced as a whole.
SET_COMMENTS = """
UNWIND $issues AS row
MATCH (i:Issue {id: row.id})
OPTIONAL MATCH (i)-[:HAS_COMMENT]->(old:Comment)
WHERE NOT old.id IN [c IN row.comments | c.id]
DETACH DELETE old
WITH DISTINCT i, row
UNWIND row.comments AS c
MERGE (n:Comment {id: c.id})
SET n.title = c.title, n.url = c.url, n.markdown = c.markdown, n.space_id = row.space_id, n.updated_at = c.updated_at
MERGE (i)-[:HAS_COMMENT]->(n)
"""

ISSUE_DIGESTS = """
MATCH (:Project {id: $project_id})-[:HAS_ISSUE]->(i:Issue)
RETURN i.id AS id, i.digest AS digest
"""

PRUNE_ISSUES = """
MATCH (:Project {id: $project_id})-[:HAS_ISSUE]->(i:Issue)
WHERE NOT i.id IN $keep
OPTIONAL MATCH (i)-[:HAS_COMMENT]->(c:Comment)
DETACH DELETE i, c
"""

IMAGE_HASHES = """
MATCH (i:Image {space_id: $space_id})
RETURN i.id AS id, i.sha256 AS sha256, i.alt_text AS alt_text, i.page_id AS page_id
"""

MERGE_IMAGES = """
UNWIND $images AS row
MATCH (p:Page {id: row.page})
MERGE (i:Image {id: row.id})
SET i.page_id = row.page_id, i.space_id = row.space_id, i.filename = row.filename, i.media_type = row.media_type,
    i.alt_text = row.alt_text, i.sha256 = row.sha256, i.data = row.data
WITH p, i
OPTIONAL MATCH (i)<-[old:HAS_IMAGE]-()
DELETE old
WITH DISTINCT p, i
MERGE (p)-[:HAS_IMAGE]->(i)
"""

PRUNE_IMAGES = """
MATCH (i:Image {space_id: $space_id})
WHERE NOT i.id IN $keep
DETACH DELETE i
"""

IMAGE_PAGE = """
MATCH (i:Image {id: $id})
RETURN i.page_id AS page_id
"""

IMAGE = """
MATCH (i:Image {id: $id})
RETURN i.id AS id, i.page_id AS page_id, i.filename AS filename, i.media_type AS media_type,
       i.alt_text AS alt_text, i.sha256 AS sha256, i.data AS data
"""
