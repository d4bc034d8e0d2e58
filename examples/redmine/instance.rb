# instance.rb: the Rails side of `setup`, in one boot of Redmine: migrations, Redmine's default
# data (roles, trackers, statuses, workflows), the settings the load needs, and the data that
# makes pages do real work. Run by setup from /usr/share/redmine, as the user that serves,
# with REDMINE_INSTANCE, RAILS_ENV=production and BUNDLE_GEMFILE set. Deterministic: the same
# data on every Ruby and every run (Random.new(23)); it does nothing once the data is there.
#
# Sizes (SEED_SCALE=1): 12 projects (3 of them private, 3 subprojects), 60 users in 4 groups,
# 1,200 issues with 2,400 journals (notes and status, assignee or done-ratio changes),
# 2,400 time entries, 120 wiki pages with 3 versions each, news, forums and messages.
require File.expand_path('config/environment', Dir.pwd)

STEP = Process.clock_gettime(Process::CLOCK_MONOTONIC)
def say(what)
  $stdout.puts format('instance: %-45s %5.1f s', what, Process.clock_gettime(Process::CLOCK_MONOTONIC) - STEP)
  $stdout.flush
end

Rails.application.load_tasks
ActiveRecord::Base.logger = nil
# As Debian's postinst does: no db/schema.rb, which is /usr/share/redmine's.
ENV['SCHEMA'] = File::NULL
# (Rails 7 moved the setting from ActiveRecord::Base to ActiveRecord.)
(ActiveRecord.respond_to?(:dump_schema_after_migration=) ? ActiveRecord : ActiveRecord::Base).dump_schema_after_migration = false
Rake::Task['db:migrate'].invoke
Rake::Task['redmine:plugins:migrate'].invoke
# Models loaded at boot (eager loading) saw the tables as they were before.
ActiveRecord::Base.descendants.each(&:reset_column_information)
say 'migrated'

if Redmine::DefaultData::Loader.no_data?
  Redmine::DefaultData::Loader.load('en')
  say "Redmine's default data loaded"
end

PASSWORD = 'tracer-load-23' # the load's user logs in with it (see load)
LOGIN = 'loader'

Setting.rest_api_enabled = '1'
Setting.default_language = 'en'
Setting.host_name = '127.0.0.1'

if Project.exists?(identifier: 'tracer-p01')
  say 'data already there'
  exit 0
end

scale = Integer(ENV['SEED_SCALE'] || 1)
rnd = Random.new(23)
WORDS = %w[parser cache queue worker report invoice export import login session timeout
           upload search index migration schema api token mail calendar gantt wiki filter
           query column journal status tracker priority version release backup restore
           memory leak slow crash retry deadlock encoding locale timezone pdf csv attachment].freeze
def words(rnd, n) = Array.new(n) { WORDS[rnd.rand(WORDS.size)] }.join(' ')

def text(rnd, paragraphs)
  Array.new(paragraphs) do |i|
    case i % 4
    when 0 then "h2. #{words(rnd, 3).capitalize}\n\n#{words(rnd, 40).capitalize}."
    when 1 then Array.new(4) { "* #{words(rnd, 6)}" }.join("\n")
    when 2 then "<pre>\n#{Array.new(5) { "  #{words(rnd, 4).tr(' ', '_')}(#{rnd.rand(100)})" }.join("\n")}\n</pre>"
    else "#{words(rnd, 25).capitalize}, see ##{rnd.rand(1..500)} and [[#{words(rnd, 2).tr(' ', '_').capitalize}]]."
    end
  end.join("\n\n")
end

# No notification mails while seeding: each would be rendered (Redmine has no mail server
# here, but builds them all the same), which took minutes.
notified = Setting.notified_events
Setting.notified_events = []

ActiveRecord::Base.transaction do
  admin = User.find_by(login: 'admin')
  admin.must_change_passwd = false
  admin.save!

  users = Array.new(60 * scale) do |i|
    u = User.new(firstname: %w[Ada Grace Linus Ken Barbara Dennis Margaret Alan][i % 8],
                 lastname: "Tester#{i}", mail: "user#{i}@example.invalid", language: 'en')
    u.login = i.zero? ? LOGIN : "user#{i}"
    u.password = u.password_confirmation = PASSWORD
    u.status = User::STATUS_ACTIVE
    u.save!
    u
  end
  groups = Array.new(4) do |g|
    Group.create!(lastname: "Team #{%w[Core Web Ops Docs][g]}").tap do |group|
      group.users << users.select.with_index { |_, i| i % 4 == g }
    end
  end
  say "#{users.size} users, #{groups.size} groups"

  manager, developer, reporter = Role.where(builtin: 0).order(:position).first(3)
  trackers = Tracker.all.to_a
  statuses = IssueStatus.order(:position).to_a
  priorities = IssuePriority.order(:position).to_a
  activity = TimeEntryActivity.first

  projects = []
  12.times do |n|
    parent = n >= 9 ? projects[n - 9] : nil
    p = Project.new(name: "#{words(rnd, 2).capitalize} #{n + 1}", identifier: format('tracer-p%02d', n + 1),
                    description: text(rnd, 3), is_public: n % 4 != 3)
    p.enabled_module_names = Redmine::AccessControl.available_project_modules.map(&:to_s)
    p.trackers = trackers
    p.save!
    p.set_parent!(parent) if parent
    Member.create!(project: p, principal: users[0], role_ids: [manager.id])
    groups.each_with_index { |g, i| Member.create!(project: p, principal: g, role_ids: [(i.even? ? developer : reporter).id]) }
    projects << p
  end
  say "#{projects.size} projects"

  issues = []
  projects.each_with_index do |p, pi|
    versions = Array.new(4) do |v|
      p.versions.create!(name: "#{pi + 1}.#{v}", status: 'open',
                         effective_date: Date.new(2026, 1, 1) + (v * 60))
    end
    categories = Array.new(3) { |c| p.issue_categories.create!(name: "#{WORDS[(pi + c) % WORDS.size]} area") }
    members = users.select.with_index { |_, i| i % 12 == pi || i.zero? } + users.sample(8, random: rnd)
    (100 * scale).times do |k|
      author = members[rnd.rand(members.size)]
      i = Issue.new(project: p, tracker: trackers[k % trackers.size], author: author,
                    subject: "#{words(rnd, 5).capitalize} (#{p.identifier} #{k})",
                    description: text(rnd, 1 + (k % 4)), priority: priorities[rnd.rand(priorities.size)],
                    status: statuses.first, assigned_to: members[rnd.rand(members.size)],
                    category: categories[k % 3], fixed_version: versions[k % 4],
                    start_date: Date.new(2026, 1, 1) + rnd.rand(120), estimated_hours: rnd.rand(1..40))
      i.due_date = i.start_date + rnd.rand(1..30)
      i.parent_issue_id = issues.last.id if k % 10 == 9 && issues.last&.project_id == p.id
      i.save!
      issues << i
    end
  end
  say "#{issues.size} issues"

  # Journals and time entries are written without the issue's own save (its callbacks made
  # this step take minutes): each journal with the details a real edit records, and the issue's
  # columns changed to match, as the history pages show them.
  journals = 0
  entries = []
  issues.each_with_index do |issue, k|
    changes = {}
    (k % 5).times do |j|
      j_at = issue.created_on + ((j + 1) * 3600 * 7)
      journal = Journal.new(journalized: issue, user: users[rnd.rand(users.size)], created_on: j_at,
                            notes: j.even? || j == 3 ? text(rnd, 1 + (j % 3)) : '')
      case j % 3
      when 0
        to = statuses[[j + 1, statuses.size - 1].min].id
        journal.details << JournalDetail.new(property: 'attr', prop_key: 'status_id', old_value: (changes[:status_id] || issue.status_id).to_s, value: to.to_s)
        changes[:status_id] = to
      when 1
        to = [(j + 1) * 20, 100].min
        journal.details << JournalDetail.new(property: 'attr', prop_key: 'done_ratio', old_value: (changes[:done_ratio] || issue.done_ratio).to_s, value: to.to_s)
        changes[:done_ratio] = to
      else
        to = users[rnd.rand(users.size)].id
        journal.details << JournalDetail.new(property: 'attr', prop_key: 'assigned_to_id', old_value: (changes[:assigned_to_id] || issue.assigned_to_id).to_s, value: to.to_s)
        changes[:assigned_to_id] = to
      end
      journal.save!
      changes[:updated_on] = j_at
      journals += 1
    end
    issue.update_columns(changes) unless changes.empty?
    2.times do |t|
      day = issue.start_date + t
      entries << { project_id: issue.project_id, issue_id: issue.id, user_id: issue.author_id, author_id: issue.author_id,
                   hours: rnd.rand(1..8), activity_id: activity.id, spent_on: day, tyear: day.year, tmonth: day.month,
                   tweek: day.cweek, comments: words(rnd, 4), created_on: issue.created_on, updated_on: issue.created_on }
    end
  end
  TimeEntry.insert_all!(entries)
  say "#{journals} journals, #{entries.size} time entries"
  Version.where("name LIKE '%.0' OR name LIKE '%.1'").update_all(status: 'closed')

  projects.each do |p|
    wiki = p.wiki || Wiki.create!(project: p, start_page: 'Wiki')
    10.times do |w|
      title = w.zero? ? 'Wiki' : words(rnd, 2).tr(' ', '_').capitalize + "_#{w}"
      page = WikiPage.new(wiki: wiki, title: title)
      content = WikiContent.new(text: text(rnd, 6), author: users[rnd.rand(users.size)], comments: 'first')
      page.save_with_content(content) or raise "wiki page #{title}: #{page.errors.full_messages}"
      2.times do |v|
        page.reload.content.text = text(rnd, 6 + v)
        page.content.author = users[rnd.rand(users.size)]
        page.content.comments = "edit #{v + 1}"
        page.content.save!
      end
    end
    3.times { |n| News.create!(project: p, author: users[0], title: "News #{n}: #{words(rnd, 3)}", summary: words(rnd, 10), description: text(rnd, 2)) }
    board = Board.create!(project: p, name: 'Forum', description: words(rnd, 6))
    5.times do
      topic = Message.create!(board: board, author: users[rnd.rand(users.size)], subject: words(rnd, 4).capitalize, content: text(rnd, 2))
      3.times { Message.create!(board: board, parent: topic, author: users[rnd.rand(users.size)], subject: "RE: #{topic.subject}", content: text(rnd, 1)) }
    end
  end
  say 'wiki pages, news, forums'
end
Setting.notified_events = notified
