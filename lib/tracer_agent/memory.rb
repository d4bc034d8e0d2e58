# frozen_string_literal: true

module TracerAgent
  # --memory: a report of the process's memory: what the kernel says (RSS, the mappings by
  # kind), what the GC says, and what the heap holds (objects by type and by class, the largest
  # strings, arrays and hashes).
  #
  # Walking a big heap takes seconds, and the walk must see a heap that does not change under
  # it, so it does not happen in the process: the eval thread forks, and the copy (which shares
  # every page with the process until one of them writes it) walks its heap, writes the report
  # into a pipe and exits. The process stops only while fork copies its page tables; its eval
  # thread then waits on the pipe without the GVL. See README.md for the pause measured.
  module Memory
    TOP_CLASSES = 20
    TOP_OBJECTS = 10
    PREVIEW = 60 # bytes of a string shown; elements of an array or pairs of a hash: 4

    module_function

    # In the process, from the eval thread: the report, as its copy wrote it. What the kernel
    # says is read first, here (reading /proc does not hold the GVL): once the copy exists, it
    # shares every page, and the process's PSS, private and shared sizes would count it.
    def report
      require 'objspace'
      parent = Process.pid
      kernel = %w[status smaps_rollup smaps].to_h { |f| [f, read_proc(parent, f)] }
      r, w = IO.pipe
      pid = TracerAgent.__fork
      child(r, w, parent, kernel) if pid.zero?
      w.close
      text = r.read
      status = reap(pid)
      raise text.chomp if status && !status.success? && !text.empty?
      raise "the copy of the process that walked its heap ended without a report (#{status.inspect})" if text.empty?

      text
    ensure
      [r, w].each { |io| io.close if io && !io.closed? }
    end

    def read_proc(pid, file)
      File.read("/proc/#{pid}/#{file}")
    rescue SystemCallError
      ''
    end

    # Its exit status; nil if an app that reaps every child (Process.wait(-1) in a loop) took
    # it first.
    def reap(pid)
      Process.wait2(pid)[1]
    rescue Errno::ECHILD
      nil
    end

    # In the copy: never returns, never runs the app's at_exit handlers. A failure is written
    # instead of the report, and the exit status says which it is.
    def child(r, w, parent, kernel)
      r.close
      code = 0
      begin
        w.write(Report.new(parent, kernel).to_s)
      rescue Exception => e # rubocop:disable Lint/RescueException
        code = 1
        w.write("#{e.class} in the copy of the process that walked its heap: #{e.message}") rescue nil # rubocop:disable Style/RescueModifier
      end
      w.close
      exit!(code)
    end

    # The report's sizes: 1023 B, 1.5 KiB, 812.3 MiB...
    def bytes(n)
      return "#{n} B" if n < 1024

      units = %w[KiB MiB GiB TiB]
      v = n.to_f
      units.each do |u|
        v /= 1024
        return format('%.1f %s', v, u) if v < 1024 || u == units.last
      end
    end

    # 1234567 as 1,234,567.
    def count(n) = n.to_s.reverse.scan(/\d{1,3}/).join(',').reverse.then { |s| n.negative? ? "-#{s}" : s }

    # The report on the heap of the process it runs in (the copy), and on the memory of process
    # pid (the original), from its /proc files read before the fork: {"status" => text, ...}.
    class Report
      STRING_BYTESIZE = String.instance_method(:bytesize)
      STRING_BYTESLICE = String.instance_method(:byteslice)
      ARRAY_LENGTH = Array.instance_method(:length)
      ARRAY_FIRST = Array.instance_method(:first)
      HASH_SIZE = Hash.instance_method(:size)
      HASH_EACH = Hash.instance_method(:each_pair)
      MODULE_NAME = Module.instance_method(:name)
      MODULE_INSPECT = Module.instance_method(:inspect)

      def initialize(pid, kernel)
        @pid = pid
        @kernel = kernel
        @taken = Time.now
        @page = GC::INTERNAL_CONSTANTS[:HEAP_PAGE_SIZE] || 65_536
      end

      def to_s
        started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        status = proc_fields(@kernel['status'])
        rollup = proc_fields(@kernel['smaps_rollup'])
        maps = mappings(@kernel['smaps'])
        @kernel.each_value(&:clear) # they would be the largest strings of the process
        look_at_live_objects
        sections = [resident(status, rollup), mapped(maps), gc, types, classes,
                    largest('strings', @strings, 'BYTES'), largest('arrays', @arrays, 'LENGTH'),
                    largest('hashes', @hashes, 'SIZE')]
        took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
        head = "memory of process #{@pid} (ruby #{RUBY_VERSION}) at #{@taken.strftime('%F %T')}, " \
               "seen by a copy of it (fork) that walked its heap in #{format('%.2f', took)} s"
        ([head] + sections).join("\n\n") << "\n"
      end

      private

      def b(n) = Memory.bytes(n)
      def c(n) = Memory.count(n)

      # Lines as "Key:   value kB" into {"Key" => bytes}.
      def proc_fields(text)
        text.each_line.with_object({}) do |l, h|
          k, v = l.split(':', 2)
          h[k] = v.to_i * 1024 if v&.end_with?(" kB\n")
        end
      end

      # The columns of words, left-aligned; the others hold numbers.
      TEXT = %w[WHAT MEANING KIND KEY NOTE TYPE CLASS PREVIEW].freeze

      def table(title, header, rows)
        widths = header.each_index.map { |i| ([header[i]] + rows.map { |r| r[i].to_s }).map(&:size).max }
        fmt = lambda do |r|
          cells = r.each_with_index.map do |v, i|
            TEXT.include?(header[i]) ? v.to_s.ljust(widths[i]) : v.to_s.rjust(widths[i])
          end
          "  #{cells.join('  ')}".rstrip
        end
        [title, fmt.call(header), *rows.map(&fmt)].join("\n")
      end

      # ---- what the kernel counts ----

      def resident(status, rollup)
        rows = [['RSS', status['VmRSS'] || rollup['Rss'], 'resident now'],
                ['peak RSS', status['VmHWM'], 'the most it ever was'],
                ['virtual', status['VmSize'], 'address space mapped']]
        unless rollup.empty?
          rows += [['PSS', rollup['Pss'], 'shared pages divided among their sharers'],
                   ['private', rollup['Private_Clean'].to_i + rollup['Private_Dirty'].to_i, 'its own pages'],
                   ['shared', rollup['Shared_Clean'].to_i + rollup['Shared_Dirty'].to_i, 'pages other processes map too'],
                   ['anonymous', rollup['Anonymous'], 'not backed by a file'],
                   ['swap', rollup['Swap'], 'swapped out']]
        end
        rows = rows.reject { |r| r[1].nil? }.map { |k, v, what| [k, b(v), what] }
        table("Process (/proc/#{@pid}/status, smaps_rollup)", %w[WHAT SIZE MEANING], rows)
      end

      # [{from:, to:, perms:, path:, rss:}] of the process's /proc/PID/smaps.
      def mappings(text)
        maps = []
        text.each_line do |l|
          if (m = l.match(/\A(\h+)-(\h+) (\S+) \S+ \S+ \d+\s*(.*)$/))
            maps << { from: m[1].to_i(16), to: m[2].to_i(16), perms: m[3], path: m[4], rss: 0 }
          elsif l.start_with?('Rss:') && maps.last
            maps.last[:rss] = l.split[1].to_i * 1024
          end
        end
        maps
      end

      KINDS = ['Ruby heap', 'malloc heap', 'stacks', 'other anonymous', 'libraries',
               'other files', 'kernel'].freeze

      # What a mapping is. A stack (a thread's, or one of Ruby's fiber pool) sits right above its
      # guard page, a small ---p mapping; a malloc arena grows into the ---p reserve right above
      # it; [heap] is the main arena. Ruby's heap pages, inside these, are counted apart (#mapped).
      def kind(maps, i)
        m = maps[i]
        path = m[:path]
        return 'malloc heap' if path == '[heap]'
        return 'stacks' if path.start_with?('[stack')
        return 'kernel' if %w[[vdso] [vvar] [vsyscall]].include?(path) || path.start_with?('[vvar')
        return path.match?(%r{\.so(\.[\d.]+)?( \(deleted\))?\z|/ruby[\d.]*\z}) ? 'libraries' : 'other files' if path.start_with?('/')

        below = i.positive? ? maps[i - 1] : nil
        above = maps[i + 1]
        if m[:perms].start_with?('rw') && below && below[:to] == m[:from] && below[:perms].start_with?('---') &&
           below[:path].empty? && below[:to] - below[:from] <= 65_536
          return 'stacks'
        end
        return 'malloc heap' if above && above[:from] == m[:to] && above[:perms].start_with?('---') && above[:path].empty?

        'other anonymous'
      end

      # The mappings by kind, Ruby's heap pages (those the walk found objects on) taken out of
      # the mappings that hold them: their RSS as theirs, up to the mapping's.
      def mapped(maps)
        return "Mappings (/proc/#{@pid}/smaps: unreadable)" if maps.empty?

        sums = KINDS.to_h { |k| [k, [0, 0, 0]] }
        # Pages the copy found objects on; its walk may have added pages of its own, past the
        # process's mappings, which match none.
        pages = @heap_pages.sort
        pi = 0
        maps.each_with_index do |m, i|
          pi += 1 while pi < pages.size && pages[pi] < m[:from]
          first = pi
          pi += 1 while pi < pages.size && pages[pi] < m[:to]
          ruby = [(pi - first) * @page, m[:to] - m[:from]].min
          ruby_rss = [ruby, m[:rss]].min
          k = sums[kind(maps, i)]
          k[0] += 1
          k[1] += m[:to] - m[:from] - ruby
          k[2] += m[:rss] - ruby_rss
          sums['Ruby heap'][1] += ruby
          sums['Ruby heap'][2] += ruby_rss
        end
        sums['Ruby heap'][0] = nil
        rows = KINDS.map { |k| [k, sums[k][0] ? c(sums[k][0]) : "#{c(@heap_pages.size)} pages", b(sums[k][1]), b(sums[k][2])] }
        rows << ['total', c(maps.size), b(maps.sum { |m| m[:to] - m[:from] }), b(maps.sum { |m| m[:rss] })]
        table("Mappings (/proc/#{@pid}/smaps; Ruby heap: its #{b(@page)} pages that hold objects; " \
              'stacks: threads\' and fibers\')',
              %w[KIND MAPPINGS SIZE RSS], rows)
      end

      # ---- what the GC says ----

      GC_KEYS = %i[count minor_gc_count major_gc_count time heap_allocated_pages heap_live_slots
                   heap_free_slots heap_final_slots old_objects total_allocated_objects
                   total_freed_objects malloc_increase_bytes oldmalloc_increase_bytes compact_count].freeze

      # The heap as it is alive: one full GC first (garbage not swept yet would count), which
      # changes nothing but the copy, then none while the walk makes objects of its own.
      def look_at_live_objects
        @gc_stat = GC.stat
        GC.start(full_mark: true, immediate_sweep: true)
        GC.disable
        @counts = ObjectSpace.count_objects
        @sizes = ObjectSpace.count_objects_size
        walk
      end

      def gc
        stat = @gc_stat
        rows = GC_KEYS.select { |k| stat.key?(k) }.map do |k|
          v = stat[k]
          [k.to_s, k.to_s.end_with?('bytes') ? b(v) : c(v), k == :time ? 'ms spent in GC' : '']
        end
        table('GC (GC.stat, at the fork)', %w[KEY VALUE NOTE], rows)
      end

      def types
        counts = @counts
        sizes = @sizes
        rows = counts.reject { |k, _| %i[TOTAL FREE].include?(k) }.sort_by { |_, n| -n }.map do |k, n|
          [k.to_s, c(n), sizes[k] ? b(sizes[k]) : '']
        end
        rows << ['total', c(counts[:TOTAL] - counts[:FREE]), b(sizes[:TOTAL] || 0)]
        table('Objects by type (ObjectSpace.count_objects, count_objects_size; live objects)',
              %w[TYPE COUNT SIZE], rows)
      end

      # ---- what the heap holds: one walk ----

      # Every object once: its class's count and memsize_of, the pages objects were found on,
      # the largest strings, arrays and hashes. Objects come in address order, page by page.
      def walk
        @by_class = Hash.new { |h, k| h[k] = [0, 0] }
        @heap_pages = []
        @strings = []
        @arrays = []
        @hashes = []
        mask = ~(@page - 1)
        last_page = nil
        ObjectSpace.each_object do |o|
          page = TracerAgent.__address(o) & mask
          @heap_pages << page if page != last_page
          last_page = page
          size = ObjectSpace.memsize_of(o)
          entry = @by_class[TracerAgent.__class_of(o)]
          entry[0] += 1
          entry[1] += size
          case o
          when String then keep(@strings, STRING_BYTESIZE.bind_call(o), o, size)
          when Array then keep(@arrays, ARRAY_LENGTH.bind_call(o), o, size)
          when Hash then keep(@hashes, HASH_SIZE.bind_call(o), o, size)
          end
        end
        @heap_pages.uniq!
      end

      # Keeps the TOP_OBJECTS largest [n, memsize, object] in top, smallest last.
      def keep(top, n, obj, size)
        return if top.size == TOP_OBJECTS && n <= top.last[0]

        top.pop if top.size == TOP_OBJECTS
        at = top.bsearch_index { |e| e[0] < n } || top.size
        top.insert(at, [n, size, obj])
      end

      def name_of(klass) = MODULE_NAME.bind_call(klass) || MODULE_INSPECT.bind_call(klass)

      def classes
        rows = @by_class.sort_by { |_, (_, size)| -size }.first(TOP_CLASSES).map do |k, (n, size)|
          [name_of(k), c(n), b(size)]
        end
        table("Objects by class (the #{TOP_CLASSES} largest in all; ObjectSpace.memsize_of)", %w[CLASS COUNT SIZE], rows)
      end

      def largest(what, top, measure)
        rows = top.map { |n, size, o| [name_of(TracerAgent.__class_of(o)), c(n), b(size), preview(o)] }
        table("Largest #{what} (#{measure.downcase})", ['CLASS', measure, 'MEMSIZE', 'PREVIEW'], rows)
      end

      # A short look at an object, without calling any method of the app's: an element of an
      # Array subclass is shown as a plain Array's would be, a custom #inspect is not called.
      def preview(o)
        case o
        when Array then array_preview(o)
        when Hash then hash_preview(o)
        else short(o, PREVIEW)
        end
      end

      def array_preview(a)
        items = ARRAY_FIRST.bind_call(a, 4).map { |e| short(e) }
        items << '...' if ARRAY_LENGTH.bind_call(a) > 4
        "[#{items.join(', ')}]"
      end

      def hash_preview(h)
        items = []
        HASH_EACH.bind_call(h) do |k, v|
          break if items.size == 4

          items << "#{short(k)} => #{short(v)}"
        end
        items << '...' if HASH_SIZE.bind_call(h) > 4
        "{#{items.join(', ')}}"
      end

      # One value, in a few words: a string cut at limit bytes, a container by its size.
      def short(o, limit = 16)
        case o
        when String
          text = String.new(STRING_BYTESLICE.bind_call(o, 0, limit)).inspect
          STRING_BYTESIZE.bind_call(o) > limit ? "#{text}..." : text
        when Symbol, Integer, Float, nil, true, false then o.inspect
        when Module then name_of(o)
        when Array then "[#{c(ARRAY_LENGTH.bind_call(o))} items]"
        when Hash then "{#{c(HASH_SIZE.bind_call(o))} pairs}"
        else "#<#{name_of(TracerAgent.__class_of(o))}>"
        end
      end
    end
  end
end
