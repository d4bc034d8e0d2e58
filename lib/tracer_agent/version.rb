# frozen_string_literal: true

module TracerAgent
  VERSION = '0.1.0'
end
