# app.rb: a small Sinatra shop served by Puma, with the tracer agent loaded.
require 'sinatra/base'
require 'json'
require 'tracer_agent'

# A price list with a slow lookup (a "database" that sleeps) and an allocation hot spot.
module Inventory
  ITEMS = (1..200).to_h { |i| ["item#{i}", { 'price' => i * 3, 'stock' => i % 7 }] }.freeze

  def self.find(name)
    sleep 0.03 if name.end_with?('7') # the slow path: one item in ten
    ITEMS[name]
  end

  def self.report
    # Builds a throwaway string and hash per item: the allocation hot spot.
    ITEMS.map { |name, row| { 'name' => name.dup, 'value' => "#{row['price'] * row['stock']}" } }
  end
end

class Shop < Sinatra::Base
  set :logging, false

  get '/price/:name' do
    item = Inventory.find(params[:name]) or halt 404
    content_type :json
    JSON.generate(item)
  end

  get '/report' do
    content_type :json
    JSON.generate(Inventory.report.first(5))
  end

  get '/health' do
    'ok'
  end
end
